"""samples_staged: new samples land here on SQLite and move into samples in bulk

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23 19:55:00

A 1,000-GPU batch inserted straight into samples dirtied one leaf page of the (gpu_id, ts_ms)
index per GPU, each copied whole into the WAL at commit (2.5 MB a batch). samples_staged has the
same columns and (ts_ms, gpu_id) key but no second index: a batch appends to a few pages at
its end, and timeline.samples_stage moves its rows into samples in bulk. PostgreSQL gets the
table too (the schema is one for both backends) and leaves it empty. Existing samples stay
where they are; a downgrade moves staged rows back into samples first, so none is lost.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
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
OTHERS = (
    ("clock_event_reasons", sa.BigInteger),
    ("ecc_sbe_volatile", sa.BigInteger),
    ("ecc_dbe_volatile", sa.BigInteger),
    ("ecc_sbe_aggregate", sa.BigInteger),
    ("ecc_dbe_aggregate", sa.BigInteger),
    ("remapped_correctable", sa.Integer),
    ("remapped_uncorrectable", sa.Integer),
    ("remap_pending", sa.Boolean),
    ("remap_failure", sa.Boolean),
    ("retired_pages_sbe", sa.Integer),
    ("retired_pages_dbe", sa.Integer),
    ("pcie_replay", sa.BigInteger),
    ("nvlink_crc_errors", sa.BigInteger),
    ("nvlink_replay_errors", sa.BigInteger),
    ("nvlink_recovery_errors", sa.BigInteger),
    ("energy_mj", sa.Float),
    ("extra", sa.JSON),
)


def upgrade() -> None:
    op.create_table(
        "samples_staged",
        sa.Column("gpu_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("ts_ms", sa.BigInteger(), autoincrement=False, nullable=False),
        *(sa.Column(f, sa.REAL(), nullable=True) for f in GAUGES),
        *(sa.Column(name, kind(), nullable=True) for name, kind in OTHERS),
        sa.PrimaryKeyConstraint("ts_ms", "gpu_id", name=op.f("pk_samples_staged")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    cols = ", ".join(f'"{c}"' for c in ("gpu_id", "ts_ms", *GAUGES, *(n for n, _ in OTHERS)))
    verb = "INSERT" if op.get_bind().dialect.name == "postgresql" else "INSERT OR IGNORE"
    tail = " ON CONFLICT DO NOTHING" if verb == "INSERT" else ""
    op.execute(f"{verb} INTO samples ({cols}) SELECT {cols} FROM samples_staged{tail}")
    op.drop_table("samples_staged")
