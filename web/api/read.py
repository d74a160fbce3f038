"""The read API: GPUs, nodes, events, jobs and the classified fleet."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import ORJSONResponse, Response
from sqlalchemy.orm import Session

from timeline import fleet, queries
from timeline.models import EventKind
from web.auth import require_reader

router = APIRouter(prefix="/api/v1", tags=["read"], dependencies=[Depends(require_reader)])
T = TypeVar("T")


async def read_session(request: Request, fn: Callable[[Session], T]) -> T:
    """Run a read-only store call in the threadpool with a session of its own."""
    factory = request.app.state.session_factory

    def run() -> T:
        with factory() as session:
            return fn(session)

    return await run_in_threadpool(run)


@router.get("/gpus")
async def gpus(request: Request, node: str | None = None) -> list[dict[str, Any]]:
    """Every GPU with its newest telemetry sample."""
    return await read_session(request, lambda s: queries.latest_gpu_samples(s, node=node))


@router.get("/nodes")
async def nodes(request: Request) -> list[dict[str, Any]]:
    """Every node with its scheduler state and the last time an agent reported from it."""
    return await read_session(request, queries.list_nodes)


@router.get("/events")
async def events(
    request: Request,
    since: float | None = Query(None, description="UNIX seconds; default: the last hour"),
    until: float | None = None,
    node: str | None = None,
    kind: str | None = None,
    job_id: str | None = None,
    limit: int = Query(500, ge=1, le=10_000),
) -> list[dict[str, Any]]:
    """Events in a window, oldest first."""
    if kind is not None and kind not in {k.value for k in EventKind}:
        raise HTTPException(422, detail=f"unknown kind {kind!r}")
    start = since if since is not None else time.time() - 3600
    return await read_session(
        request,
        lambda s: queries.events_in_window(
            s, since=start, until=until, node=node, kind=kind, job_id=job_id, limit=limit
        ),
    )


@router.get("/jobs")
async def jobs(
    request: Request, state: str | None = None, limit: int = Query(500, ge=1, le=10_000)
) -> list[dict[str, Any]]:
    """Jobs, most recently updated first."""
    return await read_session(request, lambda s: queries.list_jobs(s, state=state, limit=limit))


@router.get("/jobs/{job_id}")
async def job(request: Request, job_id: str) -> dict[str, Any]:
    """One job with its events."""
    found = await read_session(request, lambda s: queries.get_job(s, job_id=job_id))
    if found is None:
        raise HTTPException(404, detail=f"no job {job_id!r}")
    found["events"] = await read_session(
        request, lambda s: queries.events_in_window(s, job_id=job_id, limit=1000)
    )
    return found


@router.get("/fleet", response_class=ORJSONResponse)
async def fleet_state(request: Request) -> Response:
    """Every node and GPU classified busy / idle_allocated / free / failing / stale."""
    settings, cache = request.app.state.settings, request.app.state.fleet_cache

    def build(s: Session) -> bytes:
        views = fleet.views_of(*cache.rows(s, settings=settings, now=time.time()))
        # orjson serializes the dataclasses directly: 10k GPUs in milliseconds, not seconds.
        return orjson.dumps(views)

    return Response(await read_session(request, build), media_type="application/json")
