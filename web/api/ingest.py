"""POST /api/v1/ingest: agents deliver batches; each batch's valid items are stored once.

The body is read here (not declared as a FastAPI body) so its size is capped while it streams
and its items are checked one by one (timeline.intake): one bad item is rejected and named in
the answer, the rest is stored. The body's schema is still published in OpenAPI.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Future
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from timeline.bounds import TimeWindow
from timeline.errors import BatchConflict
from timeline.group_commit import groupable, store_alone
from timeline.intake import take_in
from timeline.models import AppendResult
from web.auth import Principal, require_agent

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/v1", tags=["ingest"])

BATCH_SCHEMA_REF = {"$ref": "#/components/schemas/Batch"}
_OPENAPI: dict[str, Any] = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": BATCH_SCHEMA_REF}}}
}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "no or malformed token"},
    403: {"description": "not an agent token, or a node this token may not write"},
    409: {"description": "this batch_id was stored before with different content"},
    413: {"description": "body over max_body_bytes, or more than max_batch_items items"},
    422: {"description": "not a batch: [{field, error}] names each bad envelope field"},
    503: {"description": "the database is locked or full; retry after Retry-After seconds"},
}


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"body over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:  # a lying or absent Content-Length is caught while streaming
                raise HTTPException(413, f"body over {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # gone mid-body (or cut by the body timeout): nobody to answer
        raise HTTPException(408, "the client left before its body was complete") from None
    return b"".join(chunks)


@router.post("/ingest", response_model=AppendResult, openapi_extra=_OPENAPI, responses=_RESPONSES)
async def ingest(request: Request, principal: Principal = Depends(require_agent)) -> AppendResult:
    """Store a batch from an agent: its valid items once per batch_id, the bad ones listed.

    A replay of a stored batch is answered `duplicate: true` and stores nothing; each item
    that breaks the contract (or names a node this token may not write) is left out and
    listed in `rejected` with its fields.
    """
    settings = request.app.state.settings
    metrics = request.app.state.metrics
    body = await _read_limited(request, settings.max_body_bytes)
    window = TimeWindow.around_now(
        max_age_s=settings.ingest_max_age_s, max_ahead_s=settings.ingest_max_ahead_s
    )
    state = request.app.state
    writer = state.group_writer
    # A node-bound token's GPUs' owners are checked in the batch's transaction (timeline.owners).
    bound = principal.may_write_node if principal.node_glob is not None else None

    # One hand-off to the thread pool per request: the check and the store as two cost a
    # second one per batch, a share of an agent's small batch (measured with bench ingest).
    # A sample-only batch is queued for the group writer instead (timeline.group_commit).
    def work() -> tuple[str, AppendResult | Future[AppendResult]]:
        intake = take_in(
            body,
            max_items=settings.max_batch_items,
            max_records=settings.max_batch_records,
            window=window,
            may_write_node=principal.may_write_node,
        )
        if writer is not None and groupable(intake):
            future = writer.submit(intake, received_ts=time.time(), may_write_node=bound)
            return intake.batch.node, future
        return intake.batch.node, store_alone(
            state.session_factory,
            state.write_lock,
            intake=intake,
            may_write_node=bound,
            max_items=settings.max_batch_items,
        )

    try:
        node, out = await run_in_threadpool(work)
        result = await asyncio.wrap_future(out) if isinstance(out, Future) else out
    except BatchConflict as exc:
        metrics.observe_conflict()
        log.warning(
            "batch %r from %s reuses a stored batch_id with different content; refused with 409",
            exc.batch_id,
            principal.name,
        )
        raise
    metrics.observe_ingest(result)
    _log_rejected(node, result)
    return result


def _log_rejected(node: str, result: AppendResult) -> None:
    if result.rejected and not result.duplicate:
        log.warning(
            "node %r: rejected %d item(s) of batch %r, stored the rest; first: %r",
            node,
            len(result.rejected),
            result.batch_id,
            [e.model_dump() for e in result.rejected[0].errors[:2]],
        )
