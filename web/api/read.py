"""The read API: GPUs, nodes, events, jobs and the classified fleet.

Every parameter is bounded (web.api.params) and every list answer is capped at
`api_max_response_bytes`: past it the rows stop and `X-Truncated` says how many were left out
(ask again with a narrower window or a smaller limit). At most 1,000 rows are read per call,
each within the contract's caps, so a read holds tens of MB at worst, never hundreds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel
from sqlalchemy.orm import Session

from healer import service as healer
from timeline import db, queries
from timeline.models import EventKind
from web.api.params import (
    JobIdPath,
    JobIdQuery,
    NodeQuery,
    SinceQuery,
    StateQuery,
    UntilQuery,
    limit_query,
)
from web.auth import require_reader

router = APIRouter(prefix="/api/v1", tags=["read"], dependencies=[Depends(require_reader)])
T = TypeVar("T")
TRUNCATED_HEADER = "X-Truncated"


async def read_session(request: Request, fn: Callable[[Session], T]) -> T:
    """Run a read-only store call in the threadpool with a session of its own."""
    factory = request.app.state.session_factory

    def run() -> T:
        with db.reading(factory) as session:
            return fn(session)

    return await run_in_threadpool(run)


def _size(row: Any) -> int:
    if isinstance(row, BaseModel):
        return len(row.model_dump_json())
    return len(orjson.dumps(row, default=str, option=orjson.OPT_NON_STR_KEYS))


def within_budget(request: Request, response: Response, rows: Sequence[T]) -> list[T]:
    """The leading rows that fit `api_max_response_bytes`; X-Truncated counts the rest."""
    budget = request.app.state.settings.api_max_response_bytes
    total = 0
    for i, row in enumerate(rows):
        total += _size(row)
        if total > budget:
            response.headers[TRUNCATED_HEADER] = str(len(rows) - i)
            return list(rows[:i])
    return list(rows)


@router.get("/gpus")
async def gpus(
    request: Request, response: Response, node: NodeQuery = None
) -> list[dict[str, Any]]:
    """Every GPU with its newest telemetry sample."""
    rows = await read_session(request, lambda s: queries.latest_gpu_samples(s, node=node))
    return within_budget(request, response, rows)


@router.get("/nodes")
async def nodes(request: Request, response: Response) -> list[dict[str, Any]]:
    """Every node with its scheduler state and the last time an agent reported from it."""
    return within_budget(request, response, await read_session(request, queries.list_nodes))


@router.get("/events")
async def events(
    request: Request,
    response: Response,
    since: SinceQuery = None,
    until: UntilQuery = None,
    node: NodeQuery = None,
    kind: EventKind | None = None,
    job_id: JobIdQuery = None,
    limit: int = limit_query(500, 1000),
) -> list[dict[str, Any]]:
    """Events in a window, oldest first."""
    start = since if since is not None else time.time() - 3600
    rows = await read_session(
        request,
        lambda s: queries.events_in_window(
            s, since=start, until=until, node=node, kind=kind, job_id=job_id, limit=limit
        ),
    )
    return within_budget(request, response, rows)


@router.get("/jobs")
async def jobs(
    request: Request,
    response: Response,
    state: StateQuery = None,
    limit: int = limit_query(500, 1000),
) -> list[dict[str, Any]]:
    """Jobs, most recently updated first."""
    rows = await read_session(request, lambda s: queries.list_jobs(s, state=state, limit=limit))
    return within_budget(request, response, rows)


@router.get("/jobs/{job_id}")
async def job(request: Request, response: Response, job_id: JobIdPath) -> dict[str, Any]:
    """One job with its events (as many as fit the response cap) and its lineage."""
    found = await read_session(request, lambda s: queries.get_job(s, job_id=job_id))
    if found is None:
        raise HTTPException(404, detail=f"no job {job_id!r}")
    events = await read_session(
        request, lambda s: queries.events_in_window(s, job_id=job_id, limit=1000)
    )
    found["events"] = within_budget(request, response, events)
    # Runs of this job the healer started again (requeue, resubmission), and where from.
    found["lineage"] = await read_session(
        request, lambda s: [x.model_dump() for x in healer.job_lineage(s, job_id=job_id)]
    )
    return found


@router.get("/fleet")
async def fleet_state(request: Request) -> Response:
    """Every node and GPU classified busy / idle_allocated / free / failing / stale."""
    settings, cache = request.app.state.settings, request.app.state.fleet_cache
    budget = settings.api_max_response_bytes
    body, left_out = await read_session(
        request,
        lambda s: cache.snapshot(s, settings=settings, now=time.time(), rows=True).api_body(budget),
    )
    # Serialized with orjson once per cached classification (10k GPUs: milliseconds).
    headers = {TRUNCATED_HEADER: str(left_out)} if left_out else None
    return Response(body, media_type="application/json", headers=headers)
