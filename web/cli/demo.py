"""`fleetmedic demo`: the server on the embedded SQLite default plus a simulated fleet."""

from __future__ import annotations

import logging
import secrets
import threading
import time

import httpx
import typer

from timeline.settings import Settings

log = logging.getLogger(__name__)


def feed_fleet(
    url: str, token: str, fleet: object, interval_s: float, stop: threading.Event
) -> None:
    """Post the simulated fleet's batches to the server every interval until `stop`."""
    from collector.simulator import DemoFleet

    assert isinstance(fleet, DemoFleet)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
        while not stop.is_set():
            try:
                client.get("/healthz").raise_for_status()
                break
            except httpx.HTTPError:
                stop.wait(0.2)
        first = False  # the fleet was started and its identity stored by backfill()
        while not stop.is_set():
            for batch in fleet.tick(time.time(), first=first):
                try:
                    r = client.post("/api/v1/ingest", content=batch.model_dump_json())
                    r.raise_for_status()
                except httpx.HTTPError as exc:
                    log.warning("demo fleet: post failed: %s", exc)
            first = False
            stop.wait(interval_s)


def backfill(settings: Settings, fleet: object, *, hours: float) -> int:
    """Write `hours` of the fleet's history straight to the store, so the idle view, trends
    and heatmap have data in the demo's first minute; returns batches written."""
    from collector.simulator import DemoFleet
    from timeline import db, service

    assert isinstance(fleet, DemoFleet)
    db.upgrade(settings.database_url)
    engine = db.make_engine(settings.database_url)
    factory = db.make_sessionmaker(engine)
    now, n = time.time(), 0
    for batch in fleet.backfill(start=now - hours * 3600, now=now, step_s=60.0):
        with db.unit_of_work(factory) as session:
            service.append_batch(session, batch=batch)
        n += 1
    engine.dispose()
    return n


def alert_receiver(settings: Settings, url: str) -> tuple[object, dict[str, object]]:
    """A local receiver for the demo's alerts and the settings that route every alert to it."""
    from web.notify.fakes import HttpReceiver

    receiver = HttpReceiver().start()
    routes = settings.data_dir / "demo-routes.toml"
    routes.parent.mkdir(parents=True, exist_ok=True)
    routes.write_text(
        f'[[route]]\nname = "demo-webhook"\nsink = "webhook"\nto = "{receiver.url}/alerts"\n'
    )
    return receiver, {
        "notify_enabled": True,
        "notify_routes_file": routes,
        "notify_base_url": url,
        "notify_demo_receiver_url": receiver.url,
        "notify_interval_s": 2.0,
    }


def register(app: typer.Typer) -> None:
    """Add the `demo` command."""

    @app.command("demo")
    def demo(
        nodes: int = typer.Option(16, help="Simulated nodes."),
        gpus_per_node: int = typer.Option(8, help="GPUs per node."),
        port: int = typer.Option(8080, help="Port of the server."),
        host: str = typer.Option("127.0.0.1", help="Bind address."),
        interval: float = typer.Option(5.0, help="Seconds between telemetry rounds."),
        history_hours: float = typer.Option(1.0, help="Hours of history written before start."),
        database_url: str = typer.Option(
            None, help="Default: demo.db (SQLite) in the per-user data directory."
        ),
    ) -> None:
        """Run the server with a simulated fleet; prints the URL of the fleet page."""
        from collector.simulator import DemoFleet
        from web.cli.server import run_server

        base = Settings()
        token = secrets.token_urlsafe(24)
        url = f"http://{host}:{port}"
        receiver, notify = alert_receiver(base, url)
        settings = Settings(
            database_url=database_url or f"sqlite:///{base.data_dir / 'demo.db'}",
            host=host,
            port=port,
            agent_tokens=[token],  # type: ignore[list-item]
            workers=1,  # the demo's token lives in this process only
            **notify,  # type: ignore[arg-type]
        )
        stop = threading.Event()
        fleet = DemoFleet(nodes=nodes, gpus_per_node=gpus_per_node)
        written = backfill(settings, fleet, hours=history_hours)
        typer.echo(f"backfilled {history_hours:g} h of history ({written} batches)")
        feeder = threading.Thread(
            target=feed_fleet, args=(url, token, fleet, interval, stop), daemon=True
        )
        feeder.start()
        typer.echo(f"fleetmedic demo: {nodes} nodes x {gpus_per_node} GPUs (simulated)")
        typer.echo(f"database: {settings.safe_database_url()}")
        typer.echo(f"open the fleet page: {url}/   (API docs: {url}/docs; Ctrl-C stops)")
        typer.echo(f"alerts go to a local receiver: {notify['notify_demo_receiver_url']}/")
        try:
            run_server(settings)
        finally:
            stop.set()
            receiver.close()  # type: ignore[attr-defined]
