"""Incidents: the list (open first, filterable, grouped by root cause) and one incident's page."""

from __future__ import annotations

import time
from collections import defaultdict
from functools import partial
from typing import Any, Literal

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from correlator import service as incidents
from correlator.models import Incident
from correlator.taxonomy import Blame, Category
from timeline import history, queries
from timeline.bounds import NAME_PATTERN
from web import healerview
from web.api.params import ActionIdPath, IncidentIdPath
from web.auth import Principal, Role
from web.notify import service as notify
from web.pages import charts
from web.pages.common import show
from web.pages.templating import page_admin, page_viewer

router = APIRouter(include_in_schema=False)
_CONTEXT_S = 1800.0  # the timeline shows this much before the first and after the last evidence


def root_cause(inc: Incident) -> str:
    """What groups incidents in the list: the same root cause on any node."""
    code = f" {inc.code}" if inc.code is not None else ""
    return f"{inc.category or 'unclassified'} · {inc.kind or '?'}{code} · {inc.title}"


def list_data(
    session: Session,
    *,
    state: str | None,
    category: str | None,
    blame: str | None,
    node: str | None,
) -> dict[str, Any]:
    """Incidents grouped by root cause; open ones first within and across groups."""
    rows = incidents.list_incidents(session, state=state, category=category, node=node, limit=1000)
    if blame:
        rows = [r for r in rows if r.blame == blame]
    rows.sort(key=lambda i: (i.state.value != "open", -i.last_seen_ts))
    groups: dict[str, list[Incident]] = defaultdict(list)
    for inc in rows:
        groups[root_cause(inc)].append(inc)
    ordered = sorted(groups.items(), key=lambda g: (g[1][0].state.value != "open", -len(g[1])))
    return {
        "groups": ordered,
        "count": len(rows),
        "open": sum(1 for r in rows if r.state.value == "open"),
        "filters": {
            "state": state or "",
            "category": category or "",
            "blame": blame or "",
            "node": node or "",
        },
        "categories": [c.value for c in Category],
        "blames": [b.value for b in Blame],
    }


@router.get("/incidents", response_class=HTMLResponse)
async def incidents_page(
    request: Request,
    state: Literal["open", "resolved", ""] = "",
    category: str = Query("", max_length=64, pattern=NAME_PATTERN),
    blame: str = Query("", max_length=16, pattern=NAME_PATTERN),
    node: str = Query("", max_length=255, pattern=NAME_PATTERN),
    principal: Principal = Depends(page_viewer),
) -> Response:
    """Every incident, open ones first, grouped by root cause."""
    build = partial(
        list_data,
        state=state or None,
        category=category or None,
        blame=blame or None,
        node=node or None,
    )
    return await show(request, "incidents.html.jinja", build, principal=principal)


def _affected(session: Session, inc: Incident, now: float) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    for ref in [inc.job_id, *[j.job_id for j in inc.affected_jobs]]:
        if ref and all(j["job_id"] != ref for j in jobs):
            found = queries.get_job(session, job_id=ref)
            jobs.append({**found, "now": now} if found else {"job_id": ref, "now": now})
    return jobs[:20]


def detail_data(session: Session, *, incident_id: int, now: float) -> dict[str, Any]:
    """Everything one incident's page shows."""
    inc = incidents.get_incident(session, incident_id=incident_id)
    evidence = history.events_by_ids(session, ids=inc.evidence_event_ids)
    symptoms = history.events_by_ids(session, ids=inc.symptom_event_ids)
    jobs = _affected(session, inc, now)
    nodes = {e["node"] for e in evidence + symptoms if e.get("node")}
    nodes |= {inc.culprit_node} if inc.culprit_node else set()
    since, until = inc.opened_ts - _CONTEXT_S, min(inc.last_seen_ts + _CONTEXT_S, now + 1)
    around: list[dict[str, Any]] = []
    for n in sorted(nodes)[:16]:
        around += queries.events_in_window(session, since=since, until=until, node=n, limit=200)
    return {
        "inc": inc,
        "evidence": evidence,
        "symptoms": symptoms,
        "jobs": jobs,
        "nodes": sorted(nodes),
        "timeline": charts.incident_timeline(around or evidence + symptoms, jobs),
        "actions": healerview.list_actions(session, incident_id=incident_id),
        "deliveries": notify.deliveries_for(session, incident_id=incident_id),
        "plotly": True,
    }


@router.get("/incidents/{incident_id}", response_class=HTMLResponse)
async def incident_page(
    request: Request, incident_id: IncidentIdPath, principal: Principal = Depends(page_viewer)
) -> Response:
    """One incident: explanation, evidence, timeline, actions, alerts sent."""
    build = partial(detail_data, incident_id=incident_id, now=time.time())
    return await show(
        request,
        "incident.html.jinja",
        build,
        principal=principal,
        is_admin=principal.has(Role.ADMIN),
    )


@router.post("/actions/{action_id}/{decision}")
async def decide_action(
    request: Request,
    action_id: ActionIdPath,
    decision: Literal["approve", "reject"],
    back: str = Form("/remediation", max_length=512),
    principal: Principal = Depends(page_admin),
) -> Response:
    """An admin approves or rejects a planned action (CSRF-checked like every page POST)."""
    factory, lock = request.app.state.session_factory, request.app.state.write_lock

    def run() -> None:
        with lock.hold():  # SQLite serializes writers; the lock keeps page writes off ingest's back
            healerview.decide(
                factory, action_id=action_id, approve=decision == "approve", by=principal.name
            )

    await run_in_threadpool(run)
    healer = getattr(request.app.state.runtime, "healer", None)
    if healer is not None:  # wake the healer so an approved action runs now
        healer.wake.set()
    target = back if back.startswith("/") and not back.startswith("//") else "/remediation"
    return RedirectResponse(target, status_code=303)
