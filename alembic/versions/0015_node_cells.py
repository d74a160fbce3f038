"""node_cells: each node's GPUs and newest samples as one row, kept on ingest (PostgreSQL)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 15:20:00

The fleet page on PostgreSQL joined the whole inventory with gpu_latest, sorted and aggregated
it per node on every view (340-370 ms of the statement at 100k GPUs on 2 cores). node_cells
holds that aggregate, one row per node, rewritten by the ingest for the nodes a batch touches
(timeline.node_cells). Both backends get the table (one schema); SQLite leaves it empty, as
PostgreSQL leaves samples_staged. On PostgreSQL the rows are built here from what is stored;
the statement is timeline.node_cells' as this revision found it (a migration must not import
live definitions).
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BY = 'ORDER BY g."index", g.uuid'
BACKFILL = f"""
INSERT INTO node_cells (node, idx, ut, utils, ts_ms, ts_min_ms, uuids, pcis)
SELECT g.node,
  string_agg(COALESCE(CAST(g."index" AS TEXT), ''), ',' {_BY}),
  '[' || string_agg(CASE WHEN l.util_gpu IS NULL THEN '-1'
                    ELSE CAST(CAST(round(l.util_gpu) AS INTEGER) AS TEXT) END, ',' {_BY}) || ']',
  array_agg(l.util_gpu {_BY}), array_agg(l.ts_ms {_BY}),
  CASE WHEN count(l.ts_ms) = count(*) THEN min(l.ts_ms) END,
  array_agg(CAST(g.uuid AS TEXT) {_BY}), array_agg(CAST(g.pci_bus_id AS TEXT) {_BY})
FROM gpus g LEFT JOIN gpu_latest l
  ON l.gpu_id = COALESCE(g.gpu_id, (SELECT i.id FROM gpu_ids i WHERE i.uuid = g.uuid))
GROUP BY g.node
"""


def _array(item: sa.types.TypeEngine[Any]) -> sa.types.TypeEngine[Any]:
    return sa.Text().with_variant(postgresql.ARRAY(item), "postgresql")


def upgrade() -> None:
    op.create_table(
        "node_cells",
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("idx", sa.Text(), nullable=False),
        sa.Column("ut", sa.Text(), nullable=False),
        sa.Column("utils", _array(sa.REAL()), nullable=False),
        sa.Column("ts_ms", _array(sa.BigInteger()), nullable=False),
        sa.Column("ts_min_ms", sa.BigInteger(), nullable=True),
        sa.Column("uuids", _array(sa.Text()), nullable=False),
        sa.Column("pcis", _array(sa.Text()), nullable=False),
        sa.PrimaryKeyConstraint("node", name=op.f("pk_node_cells")),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    # Every batch of a node rewrites its row: room on each page keeps those updates HOT.
    op.execute("ALTER TABLE node_cells SET (fillfactor = 50)")
    op.execute(BACKFILL)


def downgrade() -> None:
    op.drop_table("node_cells")
