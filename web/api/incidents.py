"""Incidents and idle-GPU findings, as the correlator wrote them."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request, Response

from correlator import service as incidents
from correlator.models import IdleFinding, IdleTotal, Incident
from correlator.taxonomy import Category
from web.api.params import IncidentIdPath, JobIdQuery, NodeQuery, limit_query
from web.api.read import read_session, within_budget
from web.auth import require_reader

router = APIRouter(prefix="/api/v1", tags=["incidents"], dependencies=[Depends(require_reader)])


@router.get("/incidents")
async def list_incidents(
    request: Request,
    response: Response,
    state: Literal["open", "resolved"] | None = None,
    category: Category | None = None,
    node: NodeQuery = None,
    job_id: JobIdQuery = None,
    limit: int = limit_query(200, 1000),
) -> list[Incident]:
    """Incidents, most recently seen first."""
    rows = await read_session(
        request,
        lambda s: incidents.list_incidents(
            s, state=state, category=category, node=node, job_id=job_id, limit=limit
        ),
    )
    return within_budget(request, response, rows)


@router.get("/incidents/{incident_id}")
async def get_incident(request: Request, incident_id: IncidentIdPath) -> Incident:
    """One incident with its explanation, evidence and symptom event ids."""
    return await read_session(request, lambda s: incidents.get_incident(s, incident_id=incident_id))


@router.get("/idle")
async def idle_findings(
    request: Request, response: Response, state: Literal["open", "resolved"] | None = "open"
) -> list[IdleFinding]:
    """Allocated GPUs doing nothing, most wasteful first."""
    rows = await read_session(request, lambda s: incidents.list_idle_findings(s, state=state))
    return within_budget(request, response, rows)


@router.get("/idle/totals")
async def idle_totals(
    request: Request,
    by: Literal["job_id", "user", "account"] = "user",
    state: Literal["open", "resolved"] | None = None,
) -> list[IdleTotal]:
    """Idle GPU-hours and cost per job, user or account."""
    return await read_session(request, lambda s: incidents.idle_totals(s, by=by, state=state))
