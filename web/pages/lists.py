"""The lists of jobs and of nodes, each filterable and linking to the entity's own page."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from correlator import service as incidents
from timeline import history, queries
from timeline.bounds import NAME_PATTERN
from timeline.fleet import NodeView
from web.auth import Principal
from web.pages.common import show
from web.pages.templating import page_viewer

router = APIRouter(include_in_schema=False)
MAX_JOBS = 500
MAX_NODES = 1000  # a 12.5k-node fleet lists its first thousand; the filters narrow it


def jobs_data(
    session: Session, *, state: str, user: str, account: str, partition: str, text: str
) -> dict[str, Any]:
    """The newest jobs that pass every filter given."""
    rows = queries.list_jobs(
        session, state=state or None, user=user or None, account=account or None,
        partition=partition or None, text=text or None, limit=MAX_JOBS + 1,
    )  # fmt: skip
    return {
        "jobs": rows[:MAX_JOBS],
        "more": len(rows) > MAX_JOBS,
        "filters": {
            "state": state,
            "user": user,
            "account": account,
            "partition": partition,
            "q": text,
        },
    }


@router.get("/jobs", response_class=HTMLResponse)
@router.get("/jobs/", response_class=HTMLResponse)
async def jobs_page(
    request: Request,
    state: str = Query("", max_length=32, pattern=NAME_PATTERN),
    user: str = Query("", max_length=128, pattern=NAME_PATTERN),
    account: str = Query("", max_length=128, pattern=NAME_PATTERN),
    partition: str = Query("", max_length=128, pattern=NAME_PATTERN),
    q: str = Query("", max_length=128),
    principal: Principal = Depends(page_viewer),
) -> Response:
    """Jobs, most recently updated first, filterable by state, user, account and partition."""
    build = partial(jobs_data, state=state, user=user, account=account, partition=partition,
                    text=q)  # fmt: skip
    return await show(request, "jobs.html.jinja", build, principal=principal)


def _drain(node: dict[str, Any]) -> str:
    # The fleet grid's rule of who drained a node, not a second copy of it.
    view = NodeView(node["name"], node["state"], node["reason"])
    if not view.drained:
        return ""
    return "fleetmedic" if view.drained_by_us else "person"


def nodes_data(session: Session, *, drained: str, text: str) -> dict[str, Any]:
    """Nodes by name with their drain state, GPUs and whether an open incident blames them."""
    blamed = incidents.blamed_nodes(session)
    rows = []
    for node in history.node_list(session):
        node["drain"] = _drain(node)
        node["failing"] = node["name"] in blamed
        if text and text.lower() not in node["name"].lower():
            continue
        if (drained == "yes" and not node["drain"]) or (drained == "no" and node["drain"]):
            continue
        rows.append(node)
    return {
        "nodes": rows[:MAX_NODES],
        "total": len(rows),
        "filters": {"drained": drained, "q": text},
    }


@router.get("/nodes", response_class=HTMLResponse)
@router.get("/nodes/", response_class=HTMLResponse)
async def nodes_page(
    request: Request,
    drained: Literal["", "yes", "no"] = "",
    q: str = Query("", max_length=255),
    principal: Principal = Depends(page_viewer),
) -> Response:
    """Every node: state, drain (ours or a person's), GPUs, last report, incidents."""
    build = partial(nodes_data, drained=drained, text=q)
    return await show(request, "nodes.html.jinja", build, principal=principal)
