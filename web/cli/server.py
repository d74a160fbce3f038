"""`fleetmedic serve`: the server (ingest, API, pages, periodic cluster sources, correlator)."""

from __future__ import annotations

import logging
import os
from typing import Any

import typer

from timeline.settings import Settings

log = logging.getLogger(__name__)


def serve_settings(
    host: str | None, port: int | None, database_url: str | None, workers: int | None = None
) -> Settings:
    """Settings from the environment/config file with command-line overrides."""
    overrides = {"host": host, "port": port, "database_url": database_url, "workers": workers}
    # Worker processes read settings from the environment: the overrides go there too.
    for name, value in overrides.items():
        if value is not None:
            os.environ[f"FLEETMEDIC_{name.upper()}"] = str(value)
    return Settings()


def run_server(settings: Settings, *, upgrade: bool = True) -> None:
    """Upgrade the schema, then serve until SIGTERM/SIGINT (then exit within
    `shutdown_timeout_s`, whatever clients do)."""
    import uvicorn

    from timeline import db
    from web.app import create_app
    from web.logs import configure_logging, level_of
    from web.serving import (
        GuardedHttpToolsProtocol,
        Limits,
        raise_open_files_limit,
        uvicorn_options,
    )
    from web.wiring import configure_runtime

    configure_logging(settings.log_level, settings.log_format)
    before, after = raise_open_files_limit()  # one descriptor per connection; workers inherit
    if after > before:
        log.info("open-files limit raised from %d to %d", before, after)
    if upgrade:
        db.upgrade(settings.database_url)
    GuardedHttpToolsProtocol.configure(Limits.from_settings(settings))
    debug = level_of(settings.log_level) <= logging.DEBUG
    common: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": "debug" if debug else "warning",  # uvicorn's own lines: third party
        "log_config": None,  # our handlers and format (text or JSON), not uvicorn's
        "access_log": False,
        **uvicorn_options(settings),
    }
    if settings.workers > 1:  # each worker builds its app from the environment
        uvicorn.run("web.app:app_from_env", factory=True, workers=settings.workers, **common)
    else:
        uvicorn.run(create_app(settings, configure=configure_runtime), **common)


def register(app: typer.Typer) -> None:
    """Add the `serve` command."""

    @app.command("serve")
    def serve(
        host: str = typer.Option(None, help="Bind address (FLEETMEDIC_HOST, default 127.0.0.1)."),
        port: int = typer.Option(None, help="Port (FLEETMEDIC_PORT, default 8080)."),
        database_url: str = typer.Option(None, help="Overrides FLEETMEDIC_DATABASE_URL."),
        no_upgrade: bool = typer.Option(False, help="Do not run migrations at start."),
        workers: int = typer.Option(
            None, help="Server processes (FLEETMEDIC_WORKERS, default 1); one leads the sources."
        ),
    ) -> None:
        """Run the server: ingest API, read API, fleet page, periodic sources and correlator."""
        settings = serve_settings(host, port, database_url, workers)
        if not settings.agent_tokens:
            typer.echo(
                "warning: no FLEETMEDIC_AGENT_TOKENS set; every ingest will get 403", err=True
            )
        typer.echo(f"fleetmedic serving on http://{settings.host}:{settings.port}/", err=True)
        run_server(settings, upgrade=not no_upgrade)
