"""Batch ids claimed in ingest_batches: the unique key that stores each batch once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from timeline import tables as t
from timeline.db import driver_connection, marks
from timeline.errors import BatchConflict
from timeline.models import Batch

# The one ingest_batches row a batch claims (BatchClaim's fields, in order), before VALUES.
_CLAIM = (
    "INSERT INTO ingest_batches (batch_id, agent, node, received_ts, samples, events, digest) "
    "VALUES"
)


def claim(session: Session, *, batch: Batch, samples: int, digest: str | None, now: float) -> bool:
    """Claim the batch_id: True when new; False for a replay; BatchConflict when the id holds
    other content (a NULL digest, from before revision 0004, matches anything).

    Through the driver, in the session's transaction: building this one-row statement with
    Core cost half the small batch's transaction (profiled).
    """
    cur = driver_connection(session).cursor()
    try:
        cur.execute(
            f"{_CLAIM} ({marks(session, 7)}) ON CONFLICT (batch_id) DO NOTHING",
            (batch.batch_id, batch.agent, batch.node, now, samples, len(batch.events), digest),
        )
        # The unique key decides, not a prior lookup: concurrent replays cannot both win.
        if cur.rowcount == 1:
            return True
        cur.execute(
            f"SELECT digest FROM ingest_batches WHERE batch_id = {marks(session, 1)}",
            (batch.batch_id,),
        )
        found = cur.fetchone()
    finally:
        cur.close()
    stored = None if found is None else found[0]
    if digest is not None and stored is not None and stored != digest:
        raise BatchConflict(batch.batch_id)
    return False


class BatchClaim(NamedTuple):
    """One row of ingest_batches, as claim_batches writes it."""

    batch_id: str
    agent: str
    node: str
    received_ts: float
    samples: int
    events: int
    digest: str | None


def claim_batches(session: Session, *, claims: Sequence[BatchClaim]) -> set[str]:
    """Claim several batch ids in one statement; returns those claimed (new). The ids must be
    distinct; one already stored is not claimed (the caller stores it alone, which tells a
    replay from a conflict)."""
    if not claims:
        return set()
    row = f"({marks(session, 7)})"
    cur = driver_connection(session).cursor()
    try:
        cur.execute(
            f"{_CLAIM} {', '.join([row] * len(claims))} "
            "ON CONFLICT (batch_id) DO NOTHING RETURNING batch_id",
            [v for c in claims for v in c],
        )
        return {r[0] for r in cur.fetchall()}
    finally:
        cur.close()


def stored_ids(session: Session, *, ids: Sequence[str]) -> set[str]:
    """Those of `ids` already stored (claimed), read without a write lock."""
    if not ids:
        return set()
    b = t.ingest_batches
    return set(session.execute(select(b.c.batch_id).where(b.c.batch_id.in_(ids))).scalars())
