"""GPU uuid -> gpu_ids.id, remembered per engine once the transaction that saw it committed.

Looking 1,000 uuids up on every batch was a tenth of the ingest's time (profiled). A gpu_ids
row is never deleted or renumbered, so an id seen committed stays right for the process's
life, whichever process added it; an id seen only inside a transaction (our own insert) may
vanish with its rollback, so it is remembered only after the commit.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, SessionTransaction

MAX_KNOWN = 1_000_000  # uuids per engine (~100 MB at most); past it the cache starts over
_PENDING = "fleetmedic.gpu_ids.pending"
_known: WeakKeyDictionary[Engine, dict[str, int]] = WeakKeyDictionary()


def known(session: Session) -> dict[str, int]:
    """The ids this process saw committed on the session's database (do not modify)."""
    bind = session.get_bind()
    return _known.get(bind, {}) if isinstance(bind, Engine) else {}


def remember(session: Session, ids: dict[str, int]) -> None:
    """Remember these ids once the session's transaction commits (forgotten on rollback)."""
    if ids and isinstance(session.get_bind(), Engine):
        session.info.setdefault(_PENDING, {}).update(ids)


def forget_all() -> None:
    """Drop every remembered id (for tests that rebuild a database under one engine)."""
    _known.clear()


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    pending = session.info.pop(_PENDING, None)
    if not pending:
        return
    bind = session.get_bind()
    if not isinstance(bind, Engine):
        return
    cache = _known.setdefault(bind, {})
    if len(cache) + len(pending) > MAX_KNOWN:
        cache.clear()
    cache.update(pending)


@event.listens_for(Session, "after_soft_rollback")
def _rolled_back(session: Session, _previous: SessionTransaction) -> None:
    session.info.pop(_PENDING, None)  # a savepoint's rollback too may undo our inserts


@event.listens_for(Session, "after_transaction_end")
def _ended(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # ended without a commit (closed): nothing is kept
        session.info.pop(_PENDING, None)
