"""Operations endpoints: liveness, readiness (a real write), Prometheus metrics, API docs."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from timeline import service
from timeline.db import unit_of_work
from timeline.models import Batch
from web.auth import Principal, require_viewer
from web.pages.templating import page_viewer

router = APIRouter(include_in_schema=False)
SERVER_ID = f"{socket.gethostname()}:{os.getpid()}"


def _public_or(setting: str, check: Any) -> Any:
    """A dependency: nothing when the setting makes the endpoint public, else `check`."""

    async def dependency(request: Request) -> Principal | None:
        if getattr(request.app.state.settings, setting):
            return None
        principal: Principal = await check(request)
        return principal

    dependency.__name__ = f"{setting}_or_{check.__name__}"
    return dependency


@router.get("/healthz")
def healthz() -> PlainTextResponse:
    """Liveness: the process answers. It never touches the database (see /readyz)."""
    return PlainTextResponse("ok")


@router.get("/readyz")
async def readyz(request: Request) -> PlainTextResponse:
    """Readiness: this process can write to the database now (a real write, committed).

    503 with Retry-After when the database is locked, full or unreachable.
    """
    lock = request.app.state.write_lock
    factory = request.app.state.session_factory

    def beat() -> None:
        with lock.hold(), unit_of_work(factory) as session:
            service.record_heartbeat(session, server=SERVER_ID, now=time.time())

    await run_in_threadpool(beat)
    return PlainTextResponse("ready")


@router.get("/metrics", dependencies=[Depends(_public_or("metrics_public", require_viewer))])
def metrics(request: Request) -> Response:
    """Prometheus metrics (public unless `metrics_public` is off: then a viewer token)."""
    body = generate_latest(request.app.state.metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@router.get("/openapi.json", dependencies=[Depends(_public_or("docs_public", require_viewer))])
def openapi_json(request: Request) -> JSONResponse:
    """The OpenAPI document (public unless `docs_public` is off)."""
    return JSONResponse(request.app.openapi())


@router.get("/docs", dependencies=[Depends(_public_or("docs_public", page_viewer))])
def docs() -> HTMLResponse:
    """Swagger UI over /openapi.json (public unless `docs_public` is off: then a login)."""
    return get_swagger_ui_html(openapi_url="/openapi.json", title="fleetmedic API")


def install_openapi(app: FastAPI) -> None:
    """OpenAPI with the ingest body's schema (read raw by the endpoint) and bearer auth."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        batch = Batch.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        for name, definition in batch.pop("$defs", {}).items():
            schemas.setdefault(name, definition)
        schemas["Batch"] = batch
        components["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": "agent/viewer/admin"}
        }
        schema["security"] = [{"bearer": []}, {}]  # reads may be open (no api_tokens set)
        app.openapi_schema = schema
        return schema

    app.openapi = build  # type: ignore[method-assign]
