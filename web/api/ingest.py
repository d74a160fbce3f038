"""POST /api/v1/ingest: agents deliver batches; each is stored whole, once."""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from timeline import service
from timeline.db import unit_of_work
from timeline.models import AppendResult, Batch
from web.auth import Principal, require_agent

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/v1", tags=["ingest"])


def _field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"field": ".".join(str(p) for p in err["loc"]), "error": err["msg"]}
        for err in exc.errors(include_url=False, include_input=False)[:20]
    ]


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"body over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:  # a lying or absent Content-Length is caught while streaming
            raise HTTPException(413, f"body over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


@router.post("/ingest", response_model=AppendResult)
async def ingest(request: Request, principal: Principal = Depends(require_agent)) -> AppendResult:
    """Store one batch from an agent; a replayed batch_id is acknowledged and stored nothing."""
    settings = request.app.state.settings
    body = await _read_limited(request, settings.max_body_bytes)
    try:
        batch = Batch.model_validate_json(body)
    except ValidationError as exc:
        errors = _field_errors(exc)
        log.info("rejected batch: %s", errors[:3])
        raise HTTPException(422, detail=errors) from None
    if not principal.may_write_node(batch.node):
        log.warning("%s may not write node %r; batch refused", principal.name, batch.node)
        raise HTTPException(403, detail=f"this agent token may not write node {batch.node!r}")
    factory = request.app.state.session_factory
    lock = request.app.state.write_lock

    def store() -> AppendResult:
        with lock, unit_of_work(factory) as session:
            return service.append_batch(
                session, batch=batch, received_ts=time.time(), max_items=settings.max_batch_items
            )

    result = await run_in_threadpool(store)
    request.app.state.metrics.observe_ingest(result)
    return result
