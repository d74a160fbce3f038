"""Domain errors -> HTTP: the one place that maps what the store says to a status."""

from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from sqlalchemy import exc as sa_exc

from timeline.db import unavailable
from timeline.errors import (
    BatchConflict,
    BatchTooLarge,
    InvalidBatch,
    NodeNotAllowed,
    NotFound,
    StoreUnavailable,
    TimelineError,
)
from web.pages.templating import LoginRequired

log = logging.getLogger(__name__)


def _count(request: Request, result: str) -> None:
    if request.url.path.endswith("/ingest"):
        request.app.state.metrics.batches.labels(result).inc()


def _busy(request: Request, exc: StoreUnavailable) -> JSONResponse:
    request.app.state.metrics.unavailable.labels(exc.reason).inc()
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    return JSONResponse(
        status_code=503,
        content={"detail": str(exc)},
        headers={"Retry-After": str(exc.retry_after_s)},
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the status of every domain error (and of a database that cannot work now)."""

    @app.exception_handler(BatchTooLarge)
    async def too_large(request: Request, exc: BatchTooLarge) -> JSONResponse:
        _count(request, "too_large")
        return JSONResponse(status_code=413, content={"detail": str(exc)})

    @app.exception_handler(InvalidBatch)
    async def invalid(request: Request, exc: InvalidBatch) -> JSONResponse:
        _count(request, "invalid")
        log.info("refused a batch: %r", [e.model_dump() for e in exc.errors[:3]])
        return JSONResponse(
            status_code=422, content={"detail": [e.model_dump() for e in exc.errors]}
        )

    @app.exception_handler(NodeNotAllowed)
    async def forbidden(request: Request, exc: NodeNotAllowed) -> JSONResponse:
        _count(request, "forbidden")
        log.warning("refused a batch for node %r: not this agent token's node", exc.node)
        return JSONResponse(status_code=403, content={"detail": str(exc)})

    @app.exception_handler(BatchConflict)
    async def conflict(_: Request, exc: BatchConflict) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse(status_code=404, content={"detail": str(exc)})

    @app.exception_handler(StoreUnavailable)
    async def store_unavailable(request: Request, exc: StoreUnavailable) -> JSONResponse:
        return _busy(request, exc)

    @app.exception_handler(sa_exc.SQLAlchemyError)
    async def database_error(request: Request, exc: sa_exc.SQLAlchemyError) -> JSONResponse:
        # Reads open sessions directly; their driver errors arrive here untranslated.
        busy = unavailable(exc)
        if busy is not None:
            return _busy(request, busy)
        log.error("%s %s failed in the database", request.method, request.url.path, exc_info=exc)
        return JSONResponse(status_code=500, content={"detail": "internal error"})

    @app.exception_handler(LoginRequired)
    async def to_login(_: Request, exc: LoginRequired) -> RedirectResponse:
        return RedirectResponse(f"/login?next={quote(exc.next_path)}", status_code=303)

    @app.exception_handler(TimelineError)
    async def bad_request(_: Request, exc: TimelineError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})
