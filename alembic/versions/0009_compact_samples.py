"""compact samples: integer GPU ids, integer milliseconds, 4-byte gauges, daily partitions
on PostgreSQL, and gpu_latest (the newest sample per GPU); existing rows move both ways

Revision ID: 0009
Revises: 0006
Create Date: 2026-11-23 13:50:00
"""

import time
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DAY_MS = 86_400_000
# Day partitions made here: old rows this recent, and the next few days. Older rows go to
# the DEFAULT partition (retention deletes them from there).
BACKFILL_DAYS = 35
AHEAD_DAYS = 3

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
FIELDS = (*GAUGES, *(name for name, _ in OTHERS))
COLS = ", ".join(f'"{f}"' for f in FIELDS)


def _values(gauge_type: type[sa.types.TypeEngine]) -> list[sa.Column]:
    return [sa.Column(f, gauge_type(), nullable=True) for f in GAUGES] + [
        sa.Column(name, kind(), nullable=True) for name, kind in OTHERS
    ]


def _pg() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def _day_name(day: int) -> str:
    return "samples_p" + time.strftime("%Y%m%d", time.gmtime(day * 86400))


def _create_compact() -> None:
    op.create_table(
        "samples",
        sa.Column("gpu_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("ts_ms", sa.BigInteger(), autoincrement=False, nullable=False),
        *_values(sa.REAL),
        sa.PrimaryKeyConstraint("ts_ms", "gpu_id", name=op.f("pk_samples")),
        sqlite_with_rowid=False,
        postgresql_partition_by="RANGE (ts_ms)",
    )
    op.create_index("ix_samples_gpu_id_ts_ms", "samples", ["gpu_id", "ts_ms"], unique=False)
    if not _pg():
        return
    today = int(time.time() // 86400)
    for day in range(today - BACKFILL_DAYS, today + AHEAD_DAYS + 1):
        lo, hi = day * DAY_MS, (day + 1) * DAY_MS
        op.execute(
            f"CREATE TABLE {_day_name(day)} PARTITION OF samples FOR VALUES FROM ({lo}) TO ({hi})"
        )
    op.execute("CREATE TABLE samples_default PARTITION OF samples DEFAULT")


def upgrade() -> None:
    op.create_table(
        "gpu_ids",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=96), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_ids")),
        sa.UniqueConstraint("uuid", name=op.f("uq_gpu_ids_uuid")),
    )
    op.create_table(
        "gpu_latest",
        sa.Column("gpu_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("ts_ms", sa.BigInteger(), nullable=False),
        *_values(sa.REAL),
        sa.PrimaryKeyConstraint("gpu_id", name=op.f("pk_gpu_latest")),
    )
    if _pg():  # every ingest rewrites each row: room on its page keeps the updates HOT
        op.execute("ALTER TABLE gpu_latest SET (fillfactor = 50)")
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.drop_index("ix_samples_ts")
        batch_op.drop_index("ix_samples_gpu_ts")
    op.rename_table("samples", "samples_wide")
    if _pg():  # constraint names are index names there: free pk_samples for the new table
        op.execute("ALTER TABLE samples_wide RENAME CONSTRAINT pk_samples TO pk_samples_wide")
    _create_compact()
    op.execute(
        "INSERT INTO gpu_ids (uuid, node) SELECT gpu_uuid, MAX(node) FROM samples_wide "
        "GROUP BY gpu_uuid ORDER BY gpu_uuid"
    )
    insert, conflict = ("INSERT", " ON CONFLICT DO NOTHING") if _pg() else ("INSERT OR IGNORE", "")
    op.execute(  # two rows of one GPU in the same millisecond: the first stored stays
        f"{insert} INTO samples (gpu_id, ts_ms, {COLS}) "
        f"SELECT g.id, CAST(ROUND(s.ts * 1000) AS BIGINT), "
        + ", ".join(f's."{f}"' for f in FIELDS)
        + " FROM samples_wide s JOIN gpu_ids g ON g.uuid = s.gpu_uuid ORDER BY s.id"
        + conflict
    )
    op.execute(
        f"INSERT INTO gpu_latest (gpu_id, ts_ms, {COLS}) "
        f"SELECT s.gpu_id, s.ts_ms, " + ", ".join(f's."{f}"' for f in FIELDS) + " FROM samples s "
        "JOIN (SELECT gpu_id, MAX(ts_ms) AS ts_ms FROM samples GROUP BY gpu_id) n "
        "ON n.gpu_id = s.gpu_id AND n.ts_ms = s.ts_ms"
    )
    op.drop_table("samples_wide")


def downgrade() -> None:
    op.rename_table("samples", "samples_compact")
    if _pg():
        op.execute("ALTER TABLE samples_compact RENAME CONSTRAINT pk_samples TO pk_samples_c")
    op.create_table(
        "samples",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=96), nullable=False),
        *_values(sa.Float),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_samples")),
    )
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.create_index("ix_samples_gpu_ts", ["gpu_uuid", "ts"], unique=False)
        batch_op.create_index("ix_samples_ts", ["ts"], unique=False)
    # PostgreSQL prints a real in its shortest exact form: through text, 525.4 stays 525.4
    # instead of widening to 525.4000244140625.
    widen = "CAST(CAST(c.{0} AS TEXT) AS DOUBLE PRECISION)" if _pg() else "c.{0}"
    values = [widen.format(f) if f in GAUGES else f"c.{f}" for f in FIELDS]
    op.execute(
        f"INSERT INTO samples (ts, node, gpu_uuid, {COLS}) "
        f"SELECT c.ts_ms / 1000.0, g.node, g.uuid, {', '.join(values)} "
        "FROM samples_compact c JOIN gpu_ids g ON g.id = c.gpu_id ORDER BY c.ts_ms, c.gpu_id"
    )
    op.drop_table("samples_compact")  # on PostgreSQL its partitions go with it
    op.drop_table("gpu_latest")
    op.drop_table("gpu_ids")
