"""The healer's actions: list with filters, one with its audit, approve/reject (admins), the
breaker (reset by admins), nodes kept out, notices for people, and a job's lineage."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, TypeVar

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from healer import safety, service
from healer.models import Action, AuditEntry, BreakerState, HeldNode, Lineage, Notice
from timeline.db import unit_of_work
from web.api.params import ActionIdPath, IdQuery, JobIdPath, JobIdQuery, NodeQuery, limit_query
from web.api.read import read_session
from web.auth import Principal, require_admin, require_reader

router = APIRouter(prefix="/api/v1", tags=["healer"])
T = TypeVar("T")
States = Literal["planned", "approved", "running", "done", "failed", "cancelled"]
Kinds = Literal["drain", "reset_gpu", "recover", "notify", "return"]


class ActionDetail(Action):
    """An action with its audit trail."""

    audit: list[AuditEntry] = []


async def _write(request: Request, fn: Callable[[Session], T]) -> T:
    """Run an admin's change in one transaction (SQLite writers serialized), then wake the
    healer so an approved action runs now."""
    factory, lock = request.app.state.session_factory, request.app.state.write_lock

    def run() -> T:
        with lock.hold(), unit_of_work(factory) as session:
            return fn(session)

    out = await run_in_threadpool(run)
    healer = getattr(request.app.state.runtime, "healer", None)
    if healer is not None:
        healer.wake.set()
    return out


@router.get("/actions", dependencies=[Depends(require_reader)])
async def list_actions(
    request: Request,
    state: States | None = None,
    kind: Kinds | None = None,
    node: NodeQuery = None,
    job_id: JobIdQuery = None,
    incident_id: IdQuery = None,
    limit: int = limit_query(200, 1000),
) -> list[Action]:
    """Actions, newest first."""
    return await read_session(
        request,
        lambda s: service.list_actions(
            s,
            state=state,
            kind=kind,
            node=node,
            job_id=job_id,
            incident_id=incident_id,
            limit=limit,
        ),
    )


@router.get("/actions/{action_id}", dependencies=[Depends(require_reader)])
async def get_action(request: Request, action_id: ActionIdPath) -> ActionDetail:
    """One action with every command or API call it made."""

    def read(s: Session) -> ActionDetail:
        action = service.get_action(s, action_id=action_id)
        return ActionDetail(**action.model_dump(), audit=service.list_audit(s, action_id=action_id))

    return await read_session(request, read)


@router.post("/actions/{action_id}/approve")
async def approve(
    request: Request, action_id: ActionIdPath, who: Principal = Depends(require_admin)
) -> Action:
    """An admin approves an action that waits for approval (or is only proposed)."""
    return await _write(
        request, lambda s: service.approve(s, action_id=action_id, by=who.name, now=time.time())
    )


@router.post("/actions/{action_id}/reject")
async def reject(
    request: Request, action_id: ActionIdPath, who: Principal = Depends(require_admin)
) -> Action:
    """An admin rejects a planned or approved action: it never runs."""
    return await _write(
        request, lambda s: service.reject(s, action_id=action_id, by=who.name, now=time.time())
    )


@router.get("/healer/breaker", dependencies=[Depends(require_reader)])
async def breaker(request: Request) -> BreakerState:
    """The blast-radius breaker: tripped or not, why, and when it was last reset."""
    return await read_session(request, service.get_breaker)


@router.post("/healer/breaker/reset")
async def reset_breaker(request: Request, who: Principal = Depends(require_admin)) -> BreakerState:
    """An admin closes the breaker; evidence from before the reset is not replayed."""
    return await _write(request, lambda s: safety.reset_breaker(s, by=who.name, now=time.time()))


@router.get("/healer/nodes", dependencies=[Depends(require_reader)])
async def held_nodes(request: Request) -> list[HeldNode]:
    """Nodes the healer took out and still holds, with why (support) when they stay out."""
    return await read_session(request, service.held_nodes)


@router.get("/healer/notices", dependencies=[Depends(require_reader)])
async def notices(
    request: Request, unsent: bool = False, incident_id: IdQuery = None
) -> list[Notice]:
    """Messages for job owners and the on-call (the notifier sends the unsent ones)."""
    return await read_session(
        request, lambda s: service.list_notices(s, unsent=unsent, incident_id=incident_id)
    )


@router.get("/jobs/{job_id}/lineage", dependencies=[Depends(require_reader)])
async def lineage(request: Request, job_id: JobIdPath) -> list[Lineage]:
    """Every run of a job the healer started again, oldest first."""
    return await read_session(request, lambda s: service.job_lineage(s, job_id=job_id))
