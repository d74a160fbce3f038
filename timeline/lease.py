"""The leader lease: one holder per name at a time, and an epoch that fences stale leaders.

Every server replica calls `acquire` on a timer in a short transaction of its own; the one that
gets the lease runs the periodic work. The epoch grows whenever the lease changes hands (or
lapses), and every write that must come from the leader only calls `fence` with the epoch its
process was given: a replica that was paused or cut off past its lease finds a newer epoch there
and its write is refused, even if it has not noticed yet that it lost the lease.

Times are the database's clock, so replicas on hosts whose clocks differ agree on expiry.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Float, and_, case, cast, func, or_, select, text, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from timeline import tables as t
from timeline.db import upsert_insert
from timeline.errors import StaleLeader

# acquire() stops waiting for a row lock after this; the caller retries on its next tick.
LOCK_WAIT_S = 2.0
# PostgreSQL ends a lease or fenced transaction left idle this long (its process paused or hung),
# so the lease row it locked is freed and another replica can take over.
IDLE_TX_S = 10.0


@dataclass(frozen=True)
class Lease:
    """One lease row: who holds it, in which epoch, and until when (database clock)."""

    name: str
    holder: str
    epoch: int
    acquired_ts: float
    expires_ts: float


def _is_pg(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def _db_now(session: Session) -> ColumnElement[float]:
    """The database's clock in Unix seconds, fixed for the duration of one statement."""
    if _is_pg(session):
        return cast(func.extract("epoch", func.statement_timestamp()), Float)
    return (func.julianday("now") - 2440587.5) * 86400.0


def _set_local(session: Session, setting: str, seconds: float) -> None:
    """A PostgreSQL timeout for the rest of this transaction only (SQLite has none)."""
    if _is_pg(session):
        session.execute(text(f"SET LOCAL {setting} = {int(seconds * 1000)}"))


def acquire(session: Session, *, name: str = "leader", holder: str, ttl_s: float) -> Lease | None:
    """Take or renew the lease for `holder` for `ttl_s`; None while another holder's is unexpired.

    Renewing an unexpired lease keeps its epoch. Any other acquisition (another holder, or this
    one after its lease lapsed) starts a new term: epoch + 1.
    """
    if ttl_s <= 0:
        raise ValueError(f"ttl_s must be positive, got {ttl_s}")
    _set_local(session, "lock_timeout", LOCK_WAIT_S)
    _set_local(session, "idle_in_transaction_session_timeout", IDLE_TX_S)
    lease, now = t.leases, _db_now(session)
    first = (
        upsert_insert(session, lease)
        .values(name=name, holder=holder, epoch=1, acquired_ts=now, expires_ts=now + ttl_s)
        .on_conflict_do_nothing(index_elements=[lease.c.name])
        .returning(*lease.c)
    )
    row = session.execute(first).mappings().first()
    if row is None:
        # In SET, every right-hand side reads the row as it was before this UPDATE.
        held = and_(lease.c.holder == holder, lease.c.expires_ts > now)
        take = (
            update(lease)
            .where(lease.c.name == name, or_(held, lease.c.expires_ts <= now))
            .values(
                holder=holder,
                epoch=case((held, lease.c.epoch), else_=lease.c.epoch + 1),
                acquired_ts=case((held, lease.c.acquired_ts), else_=now),
                expires_ts=now + ttl_s,
            )
            .returning(*lease.c)
        )
        row = session.execute(take).mappings().first()
    return None if row is None else Lease(**row)


def release(session: Session, *, name: str = "leader", holder: str, epoch: int) -> bool:
    """End `holder`'s term now, so that another replica takes over without waiting for expiry."""
    lease = t.leases
    _set_local(session, "idle_in_transaction_session_timeout", IDLE_TX_S)
    done = session.execute(
        update(lease)
        .where(lease.c.name == name, lease.c.holder == holder, lease.c.epoch == epoch)
        .values(expires_ts=_db_now(session))
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]


def current(session: Session, *, name: str = "leader") -> Lease | None:
    """The lease row as stored (it may have expired: compare expires_ts with now)."""
    row = session.execute(select(t.leases).where(t.leases.c.name == name)).mappings().first()
    return None if row is None else Lease(**row)


def fence(session: Session, *, name: str = "leader", epoch: int) -> None:
    """Raise StaleLeader unless `epoch` is the lease's current epoch and it is unexpired.

    Call it inside the write transaction whose effect must come from the leader only. Until that
    transaction ends, no other replica can take the lease over, so the write commits before any
    newer term begins or not at all. On PostgreSQL the lease row is held FOR SHARE, and the
    transaction is ended by the server if it then sits idle for IDLE_TX_S: keep it short.
    """
    lease = t.leases
    live = and_(lease.c.name == name, lease.c.epoch == epoch, lease.c.expires_ts > _db_now(session))
    if _is_pg(session):
        _set_local(session, "idle_in_transaction_session_timeout", IDLE_TX_S)
        ok = session.execute(select(lease.c.epoch).where(live).with_for_update(read=True)).first()
    else:
        # An UPDATE takes SQLite's write lock: no other epoch can commit before this transaction.
        done = session.execute(update(lease).where(live).values(epoch=lease.c.epoch))
        ok = done.rowcount == 1  # type: ignore[attr-defined]
    if not ok:
        raise StaleLeader(f"epoch {epoch} no longer leads {name!r}: {_describe(session, name)}")


def _describe(session: Session, name: str) -> str:
    now = current(session, name=name)
    if now is None:
        return "there is no lease"
    return f"epoch {now.epoch} is held by {now.holder} until {now.expires_ts:.3f} (database clock)"
