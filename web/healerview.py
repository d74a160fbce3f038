"""What the pages, alerts and /metrics read of the healer, when the healer is built.

The healer (issue #9) provides keyword-only functions in `healer.service` (list_actions,
get_breaker, held_nodes, action_counts, list_audit, approve, reject, list_notices,
mark_notice_sent). Until they exist the pages say "the healer is not enabled" and /metrics
leaves the healer's families empty: this module is the one place that knows whether they are.
"""

from __future__ import annotations

import importlib
import time
from types import ModuleType
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from timeline.db import unit_of_work

NOT_ENABLED = "the healer is not enabled in this build"


def _service() -> ModuleType | None:
    try:
        module = importlib.import_module("healer.service")
    except ImportError:
        return None
    return module if hasattr(module, "list_actions") else None


def available() -> bool:
    """True when the healer's service functions exist."""
    return _service() is not None


def _call(name: str, session: Session, default: Any, **kwargs: Any) -> Any:
    svc = _service()
    fn = getattr(svc, name, None) if svc is not None else None
    return default if fn is None else fn(session, **kwargs)


def list_actions(session: Session, **filters: Any) -> list[Any]:
    """The healer's actions matching the filters (incident_id, job_id, node, state)."""
    return list(_call("list_actions", session, [], **filters))


def audit(session: Session, *, action_id: int) -> list[Any]:
    """Every command or API call one action made."""
    return list(_call("list_audit", session, [], action_id=action_id))


def breaker(session: Session) -> Any:
    """The blast-radius breaker (None without a healer)."""
    return _call("get_breaker", session, None)


def breaker_label(session: Session) -> str | None:
    """ "open" (tripped: no more drains until an admin resets it) or "closed"; None: no healer."""
    state = breaker(session)
    if state is None:
        return None
    return "open" if getattr(state, "tripped", False) else "closed"


def nodes_kept_out(session: Session) -> list[Any]:
    """Nodes the healer took out and still holds."""
    return list(_call("held_nodes", session, []))


def action_counts(session: Session) -> dict[tuple[str, str], int]:
    """Actions by (kind, result), for /metrics."""
    out: dict[tuple[str, str], int] = {}
    for row in _call("action_counts", session, []):
        key = (str(row.action), str(row.result))
        out[key] = out.get(key, 0) + int(row.count)
    return out


def owner_notices(session: Session, *, limit: int = 500) -> list[Any]:
    """The healer's "tell the owner / on-call" messages not yet handed to the notifier."""
    return list(_call("list_notices", session, [], unsent=True, limit=limit))


def notice_handed_over(session: Session, *, notice_id: int, ts: float) -> None:
    """Record that the notifier took a healer message (it is then sent once, by the notifier)."""
    _call("mark_notice_sent", session, None, notice_id=notice_id, ts=ts)


def decide(factory: sessionmaker[Session], *, action_id: int, approve: bool, by: str) -> None:
    """Approve or reject a planned action in one transaction, recorded as done by `by`."""
    svc = _service()
    if svc is None:
        raise RuntimeError(NOT_ENABLED)
    fn = getattr(svc, "approve" if approve else "reject")
    with unit_of_work(factory) as session:
        fn(session, action_id=action_id, by=by, now=time.time())
