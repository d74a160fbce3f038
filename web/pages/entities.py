"""A job's page and a node's page: telemetry over time with events, incidents, lineage, drains."""

from __future__ import annotations

import re
import time
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from correlator import service as incidents
from timeline import history, queries
from timeline.bounds import NAME_PATTERN
from timeline.errors import NotFound
from web import healerview
from web.api.params import JobIdPath
from web.auth import Principal
from web.pages import charts
from web.pages.common import show
from web.pages.templating import page_viewer

router = APIRouter(include_in_schema=False)
NodePath = Annotated[str, Path(min_length=1, max_length=255, pattern=NAME_PATTERN)]
MAX_WINDOW_S = 6 * 3600.0  # telemetry shown at most this far back (longer reads rollups later)
_POINTS = 240
_WANDB_PATH = re.compile(r"^[\w.-]+/[\w.-]+/[\w.-]+$")


def _bucket(since: float, until: float) -> int:
    return max(int((until - since) / _POINTS), 10)


def _window(start: float | None, end: float | None, now: float) -> tuple[float, float]:
    until = min(end or now, now) + 60
    since = max(start or until - 3600, until - MAX_WINDOW_S)
    return since, until


def _progress(session: Session, job_id: str) -> dict[str, Any] | None:
    found = queries.events_in_window(
        session, job_id=job_id, kind="progress", limit=1, newest_first=True
    )
    return found[0] if found else None


def wandb_url(run: str | None) -> str | None:
    """The W&B page of an `entity/project/run_id` path (a local run dir has none)."""
    return f"https://wandb.ai/{run}" if run and _WANDB_PATH.match(run) else None


def job_data(session: Session, *, job_id: str, now: float) -> dict[str, Any]:
    """Everything a job's page shows."""
    job = queries.get_job(session, job_id=job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    allocs = history.job_allocations(session, job_id=job_id)
    uuids = [a["known_uuid"] for a in allocs if a["known_uuid"]][:32]
    labels = {
        a["known_uuid"]: f"{a['node']} GPU {a['gpu_index']}" for a in allocs if a["known_uuid"]
    }
    since, until = _window(job["start_ts"], job["end_ts"], now)
    series = history.gpu_series(
        session, uuids=uuids, since=since, until=until, bucket_s=_bucket(since, until)
    )
    events = queries.events_in_window(session, job_id=job_id, limit=500)
    for node in sorted({a["node"] for a in allocs})[:16]:
        events += history.fault_history(session, since=since, node=node, limit=100)
    events = [e for e in events if since <= e["ts"] <= until]
    incs = incidents.list_incidents(session, job_id=job_id, limit=1000)
    return {
        "job": job,
        "allocs": allocs,
        "chart": charts.gpu_timeseries(series, labels, events),
        "events": sorted(events, key=lambda e: e["ts"])[-200:],
        "incidents": incs,
        "cause": next((i for i in incs if i.job_id == job_id), incs[0] if incs else None),
        "lineage": history.job_lineage(session, job_id=job_id),
        "progress": _progress(session, job_id),
        "wandb_url": wandb_url(job.get("wandb_run")),
        "actions": healerview.list_actions(session, job_id=job_id),
        "window": (since, until),
        "plotly": True,
    }


@router.get("/jobs/{job_id:path}", response_class=HTMLResponse)
async def job_page(
    request: Request, job_id: JobIdPath, principal: Principal = Depends(page_viewer)
) -> Response:
    """One job: per-GPU telemetry with events, W&B progress, lineage and why it failed."""
    build = partial(job_data, job_id=job_id, now=time.time())
    return await show(request, "job.html.jinja", build, principal=principal)


def node_data(session: Session, *, name: str, now: float) -> dict[str, Any]:
    """Everything a node's page shows."""
    node = history.get_node(session, name=name)
    gpus = queries.latest_gpu_samples(session, node=name)
    if node is None and not gpus:
        raise NotFound(f"no node {name!r}")
    since = now - 3600
    series = history.gpu_series(
        session,
        uuids=[g["uuid"] for g in gpus][:16],
        since=since,
        until=now + 1,
        bucket_s=_bucket(since, now),
    )
    labels = {g["uuid"]: f"GPU {g['index']}" for g in gpus}
    failing = incidents.failing_set(session)
    holders = {}
    for a in history.allocations_between(session, since=now, until=now + 1, node=name):
        holders[a["gpu_index"]] = a
    events = queries.events_in_window(
        session, since=now - 86400, node=name, limit=300, newest_first=True
    )
    return {
        "name": name,
        "node": node or {},
        "gpus": [
            {
                **g,
                "failing": failing.for_gpu(name, g["uuid"], g["pci_bus_id"]),
                "holder": holders.get(g["index"]) or holders.get(-1),
            }
            for g in gpus
        ],
        "chart": charts.gpu_timeseries(series, labels, [e for e in events if e["ts"] >= since]),
        "events": events,
        "incidents": incidents.list_incidents(session, node=name, limit=100),
        "drains": queries.events_in_window(
            session,
            since=now - 30 * 86400,
            node=name,
            kind="node_state",
            limit=100,
            newest_first=True,
        ),
        "actions": healerview.list_actions(session, node=name),
        "plotly": True,
    }


@router.get("/nodes/{name:path}", response_class=HTMLResponse)
async def node_page(
    request: Request, name: NodePath, principal: Principal = Depends(page_viewer)
) -> Response:
    """One node: its GPUs, telemetry, events, incidents and drain history."""
    build = partial(node_data, name=name, now=time.time())
    return await show(request, "node.html.jinja", build, principal=principal)
