"""Store functions of the deliveries table; callers commit (one unit of work per step)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from timeline.deliveries import notifications as tbl
from timeline.settings import Settings
from web.notify.models import Delivery
from web.notify.routing import load_config

Key = tuple[str, str, str, str]  # subject, route, recipient, change


def known(session: Session, *, subjects: Sequence[str]) -> set[Key]:
    """Every (subject, route, recipient, change) already planned for these subjects."""
    out: set[Key] = set()
    subs = sorted(set(subjects))
    for i in range(0, len(subs), 500):
        stmt = select(tbl.c.subject_key, tbl.c.route, tbl.c.recipient, tbl.c.change).where(
            tbl.c.subject_key.in_(subs[i : i + 500])
        )
        out.update((a, b, c, d) for a, b, c, d in session.execute(stmt).all())
    return out


def plan(session: Session, *, rows: Iterable[dict[str, Any]]) -> int:
    """Insert pending deliveries (the caller checked they are new)."""
    batch = list(rows)
    if batch:
        session.execute(tbl.insert(), batch)
    return len(batch)


def due(session: Session, *, now: float, limit: int = 500) -> list[Delivery]:
    """Pending deliveries whose next try is due, oldest first."""
    stmt = (
        select(tbl)
        .where(tbl.c.status == "pending", tbl.c.next_attempt_ts <= now)
        .order_by(tbl.c.id)
        .limit(limit)
    )
    return [Delivery.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def mark_sent(session: Session, *, ids: Sequence[int], now: float) -> None:
    """Record deliveries as sent (in the transaction the leader's fence guards)."""
    session.execute(
        update(tbl)
        .where(tbl.c.id.in_(list(ids)), tbl.c.status == "pending")
        .values(
            status="sent",
            sent_ts=now,
            last_sent_ts=now,
            attempts=tbl.c.attempts + 1,
            last_error=None,
        )
    )


def mark_failed(
    session: Session, *, ids: Sequence[int], error: str, now: float, settings: Settings
) -> None:
    """Count a failed try; retry later with backoff, or give up after notify_max_attempts."""
    for row in session.execute(select(tbl.c.id, tbl.c.attempts).where(tbl.c.id.in_(list(ids)))):
        attempts = int(row.attempts) + 1
        gave_up = attempts >= settings.notify_max_attempts
        wait = min(settings.notify_backoff_s * 2**attempts, 3600.0)
        session.execute(
            update(tbl)
            .where(tbl.c.id == row.id)
            .values(
                attempts=attempts,
                failures=tbl.c.failures + 1,
                last_error=error[:500],
                status="failed" if gave_up else "pending",
                next_attempt_ts=now + wait,
            )
        )


def resend_due(session: Session, *, now: float, every_s: float) -> list[Delivery]:
    """Alertmanager alerts of still-open subjects whose last send is older than `every_s`."""
    later = tbl.alias("later")
    newer = (
        select(later.c.id)
        .where(
            later.c.subject_key == tbl.c.subject_key,
            later.c.route == tbl.c.route,
            later.c.recipient == tbl.c.recipient,
            later.c.id > tbl.c.id,
        )
        .exists()
    )
    stmt = (
        select(tbl)
        .where(tbl.c.sink == "alertmanager", tbl.c.status == "sent", tbl.c.change != "resolved")
        .where(tbl.c.last_sent_ts < now - every_s, ~newer)  # newest of its subject, still open
        .order_by(tbl.c.id)
        .limit(5000)
    )
    return [Delivery.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def touch_sent(session: Session, *, ids: Sequence[int], now: float) -> None:
    """Record a re-send."""
    session.execute(update(tbl).where(tbl.c.id.in_(list(ids))).values(last_sent_ts=now))


def count_failure(session: Session, *, ids: Sequence[int], error: str) -> None:
    """Count a failed re-send (the delivery itself stays sent)."""
    session.execute(
        update(tbl)
        .where(tbl.c.id.in_(list(ids)))
        .values(failures=tbl.c.failures + 1, last_error=error[:500])
    )


def deliveries_for(session: Session, *, incident_id: int) -> list[Delivery]:
    """Every delivery about one incident, oldest first."""
    stmt = select(tbl).where(tbl.c.incident_id == incident_id).order_by(tbl.c.id).limit(500)
    return [Delivery.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def list_deliveries(session: Session, *, limit: int = 500) -> list[Delivery]:
    """The newest deliveries."""
    stmt = select(tbl).order_by(tbl.c.id.desc()).limit(limit)
    return [Delivery.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def counts(session: Session) -> list[tuple[str, str, int, int]]:
    """(sink, status, deliveries, failed tries) for /metrics."""
    stmt = select(tbl.c.sink, tbl.c.status, func.count(), func.sum(tbl.c.failures)).group_by(
        tbl.c.sink, tbl.c.status
    )
    return [(s, st, int(n), int(f or 0)) for s, st, n, f in session.execute(stmt).all()]


def describe_routes(settings: Settings) -> list[dict[str, str]]:
    """The configured routes, for the alerts page (an unreadable file says so)."""
    try:
        config = load_config(settings)
    except (OSError, ValueError) as exc:
        return [{"name": "(routes file)", "sink": "error", "matches": str(exc)}]
    out = [{"name": r.name, "sink": r.sink, "matches": r.describe()} for r in config.routes]
    if config.owners:
        out.append({"name": "owner", "sink": config.owner_sink, "matches": "each job's owner"})
    return out
