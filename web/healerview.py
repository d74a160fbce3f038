"""What the pages, alerts and /metrics read of the healer: thin views over `healer.service`.

The web layer sits on top of the healer; this module only shapes what the pages need (a
breaker label, counts keyed for a metric) and does the one write the pages make (approve or
reject, in one transaction).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from healer import service
from healer.models import Action, BreakerState, HeldNode, Notice
from timeline.db import unit_of_work


def list_actions(session: Session, **filters: Any) -> list[Action]:
    """The healer's actions matching the filters (incident_id, job_id, node, state)."""
    return service.list_actions(session, **filters)


def audit(session: Session, *, action_id: int) -> list[Any]:
    """Every command or API call one action made."""
    return list(service.list_audit(session, action_id=action_id))


def breaker(session: Session) -> BreakerState:
    """The blast-radius breaker."""
    return service.get_breaker(session)


def breaker_label(session: Session) -> str:
    """ "open" (tripped: no more drains until an admin resets it) or "closed"."""
    return "open" if breaker(session).tripped else "closed"


def nodes_kept_out(session: Session) -> list[HeldNode]:
    """Nodes the healer took out and still holds."""
    return service.held_nodes(session)


def action_counts(session: Session) -> dict[tuple[str, str], int]:
    """Actions by (kind, result)."""
    out: dict[tuple[str, str], int] = {}
    for row in service.action_counts(session):
        key = (str(row.action), str(row.result))
        out[key] = out.get(key, 0) + int(row.count)
    return out


def owner_notices(session: Session, *, limit: int = 500) -> list[Notice]:
    """The healer's "tell the owner / on-call" messages not yet handed to the notifier."""
    return service.list_notices(session, unsent=True, limit=limit)


def notice_handed_over(session: Session, *, notice_id: int, ts: float) -> None:
    """Record that the notifier took a healer message (it is then sent once, by the notifier)."""
    service.mark_notice_sent(session, notice_id=notice_id, ts=ts)


def decide(factory: sessionmaker[Session], *, action_id: int, approve: bool, by: str) -> None:
    """Approve or reject a planned action in one transaction, recorded as done by `by`."""
    fn = service.approve if approve else service.reject
    with unit_of_work(factory) as session:
        fn(session, action_id=action_id, by=by, now=time.time())
