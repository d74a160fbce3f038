"""`fleetmedic serve`: the server (ingest, API, pages, periodic cluster sources, correlator)."""

from __future__ import annotations

import typer

from timeline.settings import Settings


def serve_settings(host: str | None, port: int | None, database_url: str | None) -> Settings:
    """Settings from the environment/config file with command-line overrides."""
    overrides: dict[str, object] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if database_url is not None:
        overrides["database_url"] = database_url
    return Settings(**overrides)  # type: ignore[arg-type]


def run_server(settings: Settings, *, upgrade: bool = True) -> None:
    """Upgrade the schema, then serve until interrupted."""
    import uvicorn

    from timeline import db
    from web.app import create_app
    from web.wiring import configure_runtime

    if upgrade:
        db.upgrade(settings.database_url)
    app = create_app(settings, configure=configure_runtime)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
    )


def register(app: typer.Typer) -> None:
    """Add the `serve` command."""

    @app.command("serve")
    def serve(
        host: str = typer.Option(None, help="Bind address (FLEETMEDIC_HOST, default 127.0.0.1)."),
        port: int = typer.Option(None, help="Port (FLEETMEDIC_PORT, default 8080)."),
        database_url: str = typer.Option(None, help="Overrides FLEETMEDIC_DATABASE_URL."),
        no_upgrade: bool = typer.Option(False, help="Do not run migrations at start."),
    ) -> None:
        """Run the server: ingest API, read API, fleet page, periodic sources and correlator."""
        settings = serve_settings(host, port, database_url)
        if not settings.agent_tokens:
            typer.echo(
                "warning: no FLEETMEDIC_AGENT_TOKENS set; every ingest will get 403", err=True
            )
        typer.echo(f"fleetmedic serving on http://{settings.host}:{settings.port}/", err=True)
        run_server(settings, upgrade=not no_upgrade)
