"""`node_cells`: each node's GPUs and their newest samples as one row, kept on ingest (PostgreSQL).

The fleet page at 100k GPUs joined 100k inventory rows with gpu_latest, sorted them and
aggregated them per node on every view: 340-370 ms of PostgreSQL's time on 2 cores, most of the
page. The same arrays are now written when they change (a batch's samples or inventory), for
its nodes only, and the page reads 12.5k rows (timeline.fleet_cells).

Correctness across concurrent batches of one node: each writer takes a transaction-scoped
advisory lock per node it rewrites, then recomputes the row in a new statement. Of two
batches that touch one node, the second to take the lock reads the table after the first
committed, so neither's samples are lost from the row. The locks are taken last in a batch's
transaction (after its gpu_latest rows) and in one order (by the lock key), so two batches
cannot wait on each other. SQLite keeps its per-GPU path and leaves the table empty.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from timeline import samples
from timeline.db import driver_connection
from timeline.fleet_read import NEWEST_SAMPLE_JOIN
from timeline.samples_sql import SqlSampleStore

# The advisory lock's first key: this table's rows (the second is hashtext(node)).
LOCK_CLASS = 7_301_001

# The nodes named, and those holding the GPUs named; each locked, in key order (PostgreSQL
# evaluates the select list after ORDER BY). Colliding hashes share a lock, which is harmless.
LOCK_SQL = f"""
SELECT n, pg_advisory_xact_lock({LOCK_CLASS}, hashtext(n)) FROM (
  SELECT unnest(CAST(%(nodes)s AS TEXT[]))
  UNION SELECT node FROM gpus WHERE uuid = ANY(CAST(%(uuids)s AS TEXT[]))
) t(n) WHERE n IS NOT NULL ORDER BY hashtext(n), n
"""

_BY_POSITION = 'ORDER BY g."index", g.uuid'
# What timeline.fleet_cells read per GPU before this table (and what the Python path reads):
# the grid's utilization is the stored one rounded, -1 where there is none.
CELLS_SELECT = f"""
SELECT g.node,
  string_agg(COALESCE(CAST(g."index" AS TEXT), ''), ',' {_BY_POSITION}),
  '[' || string_agg(CASE WHEN l.util_gpu IS NULL THEN '-1'
                    ELSE CAST(CAST(round(l.util_gpu) AS INTEGER) AS TEXT) END,
                    ',' {_BY_POSITION}) || ']',
  array_agg(l.util_gpu {_BY_POSITION}),
  array_agg(l.ts_ms {_BY_POSITION}),
  CASE WHEN count(l.ts_ms) = count(*) THEN min(l.ts_ms) END,
  array_agg(CAST(g.uuid AS TEXT) {_BY_POSITION}),
  array_agg(CAST(g.pci_bus_id AS TEXT) {_BY_POSITION})
FROM gpus g {NEWEST_SAMPLE_JOIN}
"""
_COLUMNS = ("node", "idx", "ut", "utils", "ts_ms", "ts_min_ms", "uuids", "pcis")
_UPSERT = (
    f"INSERT INTO node_cells ({', '.join(_COLUMNS)}) {{select}} GROUP BY g.node "
    "ON CONFLICT (node) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)
REFRESH_SQL = _UPSERT.format(select=CELLS_SELECT + " WHERE g.node = ANY(CAST(%(nodes)s AS TEXT[]))")
# A node whose GPUs all moved elsewhere (or were never inventoried) keeps no row.
PRUNE_SQL = (
    "DELETE FROM node_cells c WHERE c.node = ANY(CAST(%(nodes)s AS TEXT[])) "
    "AND NOT EXISTS (SELECT 1 FROM gpus g WHERE g.node = c.node)"
)


def kept(session: Session) -> bool:
    """True where this store keeps node_cells: PostgreSQL with samples in the SQL store."""
    return session.get_bind().dialect.name == "postgresql" and isinstance(
        samples.store(), SqlSampleStore
    )


def nodes_of(session: Session, *, uuids: Iterable[str]) -> list[str]:
    """The nodes the inventory places these GPUs on now (before a batch moves any)."""
    wanted = sorted(set(uuids))
    if not wanted:
        return []
    with driver_connection(session).cursor() as cur:
        cur.execute("SELECT DISTINCT node FROM gpus WHERE uuid = ANY(%s)", (wanted,))
        return [node for (node,) in cur.fetchall()]


def refresh(session: Session, *, nodes: Iterable[str] = (), uuids: Iterable[str] = ()) -> int:
    """Rewrite the rows of `nodes` and of the nodes holding the GPUs `uuids`, in the session's
    transaction; call it last in the transaction (see the module's note). Returns how many."""
    params = {"nodes": sorted(set(nodes)), "uuids": sorted(set(uuids))}
    if not params["nodes"] and not params["uuids"]:
        return 0
    with driver_connection(session).cursor() as cur:
        cur.execute(LOCK_SQL, params)
        locked = [node for node, _ in cur.fetchall()]
        if not locked:
            return 0
        # A new statement, so a new snapshot: it sees every batch that held these locks before.
        cur.execute(REFRESH_SQL, {"nodes": locked})
        cur.execute(PRUNE_SQL, {"nodes": locked})
    return len(locked)


def rebuild(session: Session) -> int:
    """Rewrite every row from the inventory and gpu_latest (after rows were written by hand,
    as a benchmark's seeding or a restore does). Returns how many nodes have a row."""
    with driver_connection(session).cursor() as cur:
        # Writers wait meanwhile (their refresh would otherwise race the full rewrite).
        cur.execute("LOCK TABLE node_cells IN EXCLUSIVE MODE")
        cur.execute("DELETE FROM node_cells")
        cur.execute(_UPSERT.format(select=CELLS_SELECT))
        return int(cur.rowcount)
