"""node_cells: each node's GPUs and newest samples as one row, kept on ingest (PostgreSQL)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 15:20:00

The fleet page on PostgreSQL joined the whole inventory with gpu_latest, sorted and aggregated
it per node on every view (340-370 ms of the statement at 100k GPUs on 2 cores). node_cells
holds that aggregate, one row per node, rewritten by the ingest for the nodes a batch touches
(timeline.node_cells). Both backends get the table (one schema); SQLite leaves it empty, as
PostgreSQL leaves samples_staged. On PostgreSQL, functions made here keep it: a trigger after
each statement that writes gpu_latest rewrites the rows of the nodes it touched, in that
statement's transaction (no Python per batch: a call per batch from the server cost 0.5 ms of
its CPU, about a fifth of an agent batch's); the ingest calls the refresh itself for batches
that move GPUs between nodes. The rows are built here from what is stored.
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
COLUMNS = ("node", "idx", "ut", "utils", "ts_ms", "ts_min_ms", "uuids", "pcis")
# Each node's GPUs in index order with their newest samples (what the fleet page read per GPU
# before: the grid's utilization is the stored one rounded, -1 where there is none).
CELLS = f"""
SELECT g.node,
  string_agg(COALESCE(CAST(g."index" AS TEXT), ''), ',' {_BY}),
  '[' || string_agg(CASE WHEN l.util_gpu IS NULL THEN '-1'
                    ELSE CAST(CAST(round(l.util_gpu) AS INTEGER) AS TEXT) END, ',' {_BY}) || ']',
  array_agg(l.util_gpu {_BY}), array_agg(l.ts_ms {_BY}),
  CASE WHEN count(l.ts_ms) = count(*) THEN min(l.ts_ms) END,
  array_agg(CAST(g.uuid AS TEXT) {_BY}), array_agg(CAST(g.pci_bus_id AS TEXT) {_BY})
FROM gpus g LEFT JOIN gpu_latest l
  ON l.gpu_id = COALESCE(g.gpu_id, (SELECT i.id FROM gpu_ids i WHERE i.uuid = g.uuid))
"""
UPSERT = (
    f"INSERT INTO node_cells ({', '.join(COLUMNS)}) {CELLS} {{where}} GROUP BY g.node "
    "ON CONFLICT (node) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])
)
LOCK_CLASS = 7301001  # the advisory locks' first key: node_cells rows (the second: hashtext)
MANY = 512  # more nodes than this in one statement lock the table, not each node

# Rewrite the rows of `touched` (NULL: every node); a node with no GPU left keeps no row.
WRITE = f"""
CREATE FUNCTION fleetmedic_node_cells_write(touched TEXT[]) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
  IF touched IS NULL THEN
    {UPSERT.format(where="")};
    DELETE FROM node_cells c WHERE NOT EXISTS (SELECT 1 FROM gpus g WHERE g.node = c.node);
  ELSE
    {UPSERT.format(where="WHERE g.node = ANY(touched)")};
    DELETE FROM node_cells c WHERE c.node = ANY(touched)
      AND NOT EXISTS (SELECT 1 FROM gpus g WHERE g.node = c.node);
  END IF;
END $fn$
"""
# Lock, then rewrite in new statements (new snapshots: every batch that held these locks before
# has committed and is seen). Per node, in key order. A transaction that would hold more than
# MANY of them (a bulk write: a restore, a seeding) locks the table instead, since a lock per
# node would fill PostgreSQL's lock table; that waits for and holds off every other writer.
# How many a transaction holds is counted in a transaction-local setting.
REFRESH = f"""
CREATE FUNCTION fleetmedic_node_cells_refresh(touched TEXT[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
  held INTEGER := COALESCE(NULLIF(current_setting('fleetmedic.node_cell_locks', true), ''), '0');
BEGIN
  IF touched IS NULL OR cardinality(touched) = 0 THEN
    RETURN;
  END IF;
  IF held < 0 OR held + cardinality(touched) > {MANY} THEN
    LOCK TABLE node_cells IN SHARE ROW EXCLUSIVE MODE;
    PERFORM set_config('fleetmedic.node_cell_locks', '-1', true);
  ELSE
    PERFORM pg_advisory_xact_lock({LOCK_CLASS}, k.h)
      FROM (SELECT DISTINCT hashtext(n) AS h FROM unnest(touched) n ORDER BY 1) k;
    PERFORM set_config('fleetmedic.node_cell_locks', CAST(held + cardinality(touched) AS TEXT),
                       true);
  END IF;
  PERFORM fleetmedic_node_cells_write(touched);
END $fn$
"""
# After each statement that writes gpu_latest: the nodes of the GPUs it wrote.
ON_SAMPLES = """
CREATE FUNCTION fleetmedic_node_cells_on_samples() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM fleetmedic_node_cells_refresh(ARRAY(
    SELECT DISTINCT g.node FROM fresh r JOIN gpu_ids i ON i.id = r.gpu_id
    JOIN gpus g ON g.uuid = i.uuid));
  RETURN NULL;
END $fn$
"""
# INSERT ... ON CONFLICT DO UPDATE fires both: inserted rows reach one, updated rows the other.
TRIGGERS = [
    f"CREATE TRIGGER node_cells_on_{event.lower()} AFTER {event} ON gpu_latest "
    "REFERENCING NEW TABLE AS fresh FOR EACH STATEMENT "
    "EXECUTE FUNCTION fleetmedic_node_cells_on_samples()"
    for event in ("INSERT", "UPDATE")
]
FUNCTIONS = ("on_samples()", "refresh(TEXT[])", "write(TEXT[])")


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
    for statement in (WRITE, REFRESH, ON_SAMPLES, *TRIGGERS):
        op.execute(statement)
    op.execute("SELECT fleetmedic_node_cells_write(NULL)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for event in ("insert", "update"):
            op.execute(f"DROP TRIGGER node_cells_on_{event} ON gpu_latest")
        for function in FUNCTIONS:
            op.execute(f"DROP FUNCTION fleetmedic_node_cells_{function}")
    op.drop_table("node_cells")
