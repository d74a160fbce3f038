"""`node_cells`: each node's GPUs and their newest samples as one row, kept on ingest (PostgreSQL).

The fleet page at 100k GPUs joined 100k inventory rows with gpu_latest, sorted them and
aggregated them per node on every view: 340-370 ms of PostgreSQL's time on 2 cores, most of the
page. The same arrays are now written when they change, for the changed nodes only, and the
page reads 12.5k rows (timeline.fleet_cells).

PostgreSQL keeps them itself (revision 0015): a trigger after each statement that writes
gpu_latest calls fleetmedic_node_cells_refresh for the nodes of the GPUs it wrote, in the
batch's transaction. That function takes a transaction-scoped advisory lock per node, in key
order, and then rewrites the rows in new statements: of two batches that touch one node, the
second to take the lock reads the table after the first committed, so neither's samples are
lost from the row. gpu_latest is written last in a batch (timeline.service), so the locks are
too, and the batches of different nodes never wait on each other. A batch that moves GPUs
between nodes has its inventory nodes refreshed here, at its end. SQLite keeps its per-GPU
path and leaves the table empty.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from timeline.db import driver_connection


def kept(session: Session) -> bool:
    """True where this database keeps node_cells (PostgreSQL)."""
    return session.get_bind().dialect.name == "postgresql"


def nodes_of(session: Session, *, uuids: Iterable[str]) -> list[str]:
    """The nodes the inventory places these GPUs on now (before a batch moves any)."""
    wanted = sorted(set(uuids))
    if not wanted:
        return []
    with driver_connection(session).cursor() as cur:
        cur.execute("SELECT DISTINCT node FROM gpus WHERE uuid = ANY(%s)", (wanted,))
        return [node for (node,) in cur.fetchall()]


def refresh(session: Session, *, nodes: Iterable[str]) -> None:
    """Rewrite the rows of `nodes` in the session's transaction, under their locks; call it
    last in the transaction (see the module's note)."""
    touched = sorted(set(nodes))
    if touched:
        with driver_connection(session).cursor() as cur:
            cur.execute("SELECT fleetmedic_node_cells_refresh(%s)", (touched,))


def rebuild(session: Session) -> int:
    """Rewrite every row from the inventory and gpu_latest (after rows were written by hand,
    as a restore does). Returns how many nodes have a row."""
    with driver_connection(session).cursor() as cur:
        # Writers wait meanwhile (their refresh would otherwise race the full rewrite).
        cur.execute("LOCK TABLE node_cells IN EXCLUSIVE MODE")
        cur.execute("SELECT fleetmedic_node_cells_write(NULL)")
        cur.execute("SELECT count(*) FROM node_cells")
        found = cur.fetchone()
        return int(found[0]) if found else 0
