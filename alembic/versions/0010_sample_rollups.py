"""sample rollups: per GPU and minute / hour, min, max, mean, last and count of each gauge

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 14:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GAUGES = (
    "util_gpu",
    "util_mem",
    "mem_used_mb",
    "mem_total_mb",
    "power_w",
    "temp_gpu",
    "temp_mem",
    "sm_clock_mhz",
)


def _create(name: str) -> None:
    cols: list[sa.Column] = []
    for f in GAUGES:
        cols += [sa.Column(f"{f}_{s}", sa.REAL(), nullable=True) for s in ("min", "max", "mean")]
        cols.append(sa.Column(f"{f}_last", sa.REAL(), nullable=True))
        cols.append(sa.Column(f"{f}_n", sa.Integer(), nullable=False))
    # Column order as in timeline.tables: the four stats, then the count, per gauge.
    op.create_table(
        name,
        sa.Column("bucket_ms", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("gpu_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("first_ts_ms", sa.BigInteger(), nullable=False),
        sa.Column("last_ts_ms", sa.BigInteger(), nullable=False),
        *cols,
        sa.PrimaryKeyConstraint("bucket_ms", "gpu_id", name=op.f(f"pk_{name}")),
        sqlite_with_rowid=False,
    )
    op.create_index(f"ix_{name}_gpu_id_bucket_ms", name, ["gpu_id", "bucket_ms"], unique=False)


def upgrade() -> None:
    _create("samples_1m")
    _create("samples_1h")
    op.create_table(
        "rollup_marks",
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("done_until_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("level", name=op.f("pk_rollup_marks")),
    )


def downgrade() -> None:
    op.drop_table("rollup_marks")
    for name in ("samples_1h", "samples_1m"):
        op.drop_index(f"ix_{name}_gpu_id_bucket_ms", table_name=name)
        op.drop_table(name)
