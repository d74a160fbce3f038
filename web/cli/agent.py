"""`fleetmedic agent`: the node agent (NVML or replay sources -> spool -> ingest API)."""

from __future__ import annotations

import logging
import signal
import socket
from pathlib import Path
from typing import Any

import typer

from timeline.settings import Settings

log = logging.getLogger(__name__)


def _nvml_module(fake: bool, fake_gpus: int) -> Any:
    if fake:
        from collector.fakenvml import FakeNvml

        return FakeNvml(gpus=fake_gpus)
    import pynvml

    return pynvml


def build_sources(
    *,
    names: list[str],
    node: str,
    settings: Settings,
    interval: float,
    replay: Path | None,
    replay_speed: float,
    fake_nvml: bool,
    fake_gpus: int,
    state_dir: Path,
) -> tuple[list[Any], list[Any]]:
    """(polled, streaming) sources for the names given on the command line."""
    from collector.agent import Polled

    polled: list[Polled] = []
    streaming: list[Any] = []
    nvml_source: Any = None
    for name in sorted(names, key=lambda n: n != "nvml"):  # nvml first: kmsg maps PCI ids with it
        if name == "nvml":
            from collector.nvml import NvmlSource
            from collector.nvml_events import NvmlEventSource
            from collector.procs import ProcessJobMapper

            nvml = _nvml_module(fake_nvml, fake_gpus)
            mapper = ProcessJobMapper(settings.agent_proc_root)
            src = NvmlSource(
                nvml, node=node, slow_every=settings.agent_slow_every, proc_mapper=mapper
            )
            polled.append(Polled(src, interval))
            streaming.append(NvmlEventSource(nvml, node=node))
            nvml_source = src
        elif name == "kmsg":
            from collector.kmsg import KmsgSource

            streaming.append(
                KmsgSource(
                    node=node,
                    state_path=state_dir / "kmsg-state.json",
                    gpu_map=nvml_source.gpu_map if nvml_source is not None else None,
                )
            )
        elif name == "replay":
            from collector.replay import ReplaySource

            if replay is None:
                raise typer.BadParameter("--source replay needs --replay FILE")
            streaming.append(ReplaySource(replay, node=node, speed=replay_speed, loop=True))
        else:
            raise typer.BadParameter(f"unknown source {name!r} (nvml, kmsg, replay)")
    return polled, streaming


def build_agent(
    settings: Settings,
    *,
    server: str | None,
    token: str | None,
    node: str | None,
    spool: Path | None,
    sources: dict[str, Any],
) -> tuple[Any, str]:
    """The wired Agent (spool, delivery, sources) and a one-line description of it."""
    from collector.agent import Agent
    from collector.delivery import Delivery
    from collector.spool import Spool

    token_value = token or (
        settings.agent_token.get_secret_value() if settings.agent_token else None
    )
    if not token_value:
        raise typer.BadParameter("an agent token is required (--token or FLEETMEDIC_AGENT_TOKEN)")
    node_name = node or settings.agent_node or socket.gethostname()
    spool_path = Path(spool or settings.agent_spool_path or settings.data_dir / "agent-spool.db")
    the_spool = Spool(
        spool_path, max_rows=settings.agent_spool_max_rows, max_bytes=settings.agent_spool_max_bytes
    )
    delivery = Delivery(
        spool=the_spool,
        server_url=server or settings.agent_server_url,
        token=token_value,
        agent=f"fleetmedic-agent@{node_name}",
        node=node_name,
        max_batch_items=settings.agent_batch_max_items,
    )
    polled, streaming = build_sources(
        node=node_name, settings=settings, state_dir=spool_path.parent, **sources
    )
    the_agent = Agent(
        spool=the_spool,
        delivery=delivery,
        polled=polled,
        streaming=streaming,
        flush_interval_s=settings.agent_flush_interval_s,
        on_stop=[p.source.close for p in polled if hasattr(p.source, "close")],
    )
    names = ", ".join(sources["names"])
    return the_agent, f"{node_name}: sources {names}, spool {spool_path}, server {delivery.url}"


def register(app: typer.Typer) -> None:
    """Add the `agent` command."""

    @app.command("agent")
    def agent(
        server: str = typer.Option(None, help="Server URL (FLEETMEDIC_AGENT_SERVER_URL)."),
        token: str = typer.Option(None, help="Agent token (or FLEETMEDIC_AGENT_TOKEN)."),
        node: str = typer.Option(None, help="Node name (default: host name)."),
        interval: float = typer.Option(None, help="Seconds between NVML polls (default 10)."),
        spool: Path = typer.Option(None, help="Spool file (default: <data dir>/agent-spool.db)."),
        source: list[str] = typer.Option(
            ["nvml"], help="Sources: nvml, kmsg, replay (repeatable)."
        ),
        replay: Path = typer.Option(None, help="JSONL file for --source replay."),
        replay_speed: float = typer.Option(1.0, help="Replay pace (1 = recorded, 0 = max)."),
        fake_nvml: bool = typer.Option(False, help="Use the recorded-H100 fake NVML (demo)."),
        fake_gpus: int = typer.Option(1, help="GPUs the fake NVML simulates."),
    ) -> None:
        """Run the node agent until SIGTERM/SIGINT; everything is spooled before delivery."""
        # A line per poll (APScheduler) and per POST (httpx) would drown what matters.
        for noisy in ("apscheduler", "httpx"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        settings = Settings()
        sources = {
            "names": source,
            "interval": interval or settings.agent_interval_s,
            "replay": replay,
            "replay_speed": replay_speed,
            "fake_nvml": fake_nvml,
            "fake_gpus": fake_gpus,
        }
        the_agent, description = build_agent(
            settings, server=server, token=token, node=node, spool=spool, sources=sources
        )
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: the_agent.stop_event.set())
        typer.echo(f"fleetmedic agent on {description}", err=True)
        the_agent.run_forever()
