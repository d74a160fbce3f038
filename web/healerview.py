"""What the pages and /metrics read of the healer, when the healer is built.

The healer (issue #9) provides keyword-only functions in `healer.service`. Until they exist the
pages say "the healer is not enabled" and /metrics leaves the healer's families empty: this
module is the one place that knows whether they are there.
"""

from __future__ import annotations

import importlib
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


def breaker_state(session: Session) -> Any:
    """The blast-radius breaker, or None when there is no healer."""
    return _call("breaker_state", session, None)


def nodes_kept_out(session: Session) -> list[Any]:
    """Nodes the healer keeps out of service."""
    return list(_call("nodes_kept_out", session, []))


def action_counts(session: Session) -> dict[tuple[str, str], int]:
    """Actions by (kind, result), for /metrics."""
    return dict(_call("action_counts", session, {}))


def decide(factory: sessionmaker[Session], *, action_id: int, approve: bool, by: str) -> None:
    """Approve or reject a planned action in one transaction, recorded as done by `by`."""
    svc = _service()
    if svc is None:
        raise RuntimeError(NOT_ENABLED)
    fn = getattr(svc, "approve_action" if approve else "reject_action")
    with unit_of_work(factory) as session:
        fn(session, action_id=action_id, by=by)
