"""Remediation: the healer's actions by state, pending approvals, time to recover, the breaker;
and the alerts page: every notification delivery, failed ones first."""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from timeline.settings import Settings
from web import healerview
from web.auth import Principal, Role
from web.notify import service as notify
from web.pages.common import show
from web.pages.templating import page_viewer

router = APIRouter(include_in_schema=False)


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def remediation_data(session: Session) -> dict[str, Any]:
    """What the remediation page shows."""
    actions = healerview.list_actions(session)
    by_state: dict[str, list[Any]] = defaultdict(list)
    recover = []
    for a in actions:
        by_state[str(_field(a, "state"))].append(a)
        start, done = _field(a, "created_ts"), _field(a, "finished_ts")
        if start and done:
            recover.append(float(done) - float(start))
    recover.sort()
    return {
        "by_state": dict(by_state),
        "pending": by_state.get("planned", []),
        "ttr_p50": recover[len(recover) // 2] if recover else None,
        "kept_out": healerview.nodes_kept_out(session),
        "breaker": healerview.breaker(session),
        "breaker_label": healerview.breaker_label(session),
    }


@router.get("/remediation", response_class=HTMLResponse)
async def remediation_page(
    request: Request, principal: Principal = Depends(page_viewer)
) -> Response:
    """The healer's work, or a note that it is not enabled."""
    return await show(
        request,
        "remediation.html.jinja",
        remediation_data,
        principal=principal,
        is_admin=principal.has(Role.ADMIN),
    )


def notifications_data(session: Session, *, settings: Settings) -> dict[str, Any]:
    """Every alert delivery (failed ones first) and the configured routes."""
    rows = notify.list_deliveries(session, limit=500)
    rows.sort(key=lambda d: (d.status != "failed", -(d.sent_ts or d.created_ts)))
    return {
        "deliveries": rows,
        "failed": sum(1 for d in rows if d.status == "failed"),
        "routes": notify.describe_routes(settings),
        "receiver_url": settings.notify_demo_receiver_url,
    }


@router.get("/notifications", response_class=HTMLResponse)
async def notifications_page(
    request: Request, principal: Principal = Depends(page_viewer)
) -> Response:
    """Every alert delivery, failed ones first, and where the local receiver shows them."""
    build = partial(notifications_data, settings=request.app.state.settings)
    return await show(request, "notifications.html.jinja", build, principal=principal)
