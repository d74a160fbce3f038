"""gpu_latest: fillfactor 20 on PostgreSQL, so each ingest's rewrite of its rows stays HOT

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 18:05:00

Every 1,000-sample batch updates 1,000 rows of gpu_latest. At fillfactor 50 a quarter of those
updates were not HOT under `bench ingest` (n_tup_hot_upd 124,036 of n_tup_upd 164,000): a page
had no room left for the new versions while concurrent batches' snapshots kept the old ones,
so the update also wrote the primary key index. The table holds one row per GPU: 20 leaves
room for four versions of each row at a few hundred bytes a GPU. Pages written from now on
get it; existing ones as their rows move.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _pg() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def upgrade() -> None:
    if _pg():
        op.execute("ALTER TABLE gpu_latest SET (fillfactor = 20)")


def downgrade() -> None:
    if _pg():
        op.execute("ALTER TABLE gpu_latest SET (fillfactor = 50)")
