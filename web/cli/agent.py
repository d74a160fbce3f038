"""`fleetmedic agent`: the node agent (NVML, kmsg, DCGM, job logs, replay -> spool -> ingest)."""

from __future__ import annotations

import logging
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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


SOURCES = ("nvml", "kmsg", "dcgm", "joblog", "replay")


def default_sources(which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """Sources run when none is named: NVML and the kernel log, job logs where Slurm is."""
    return ["nvml", "kmsg", *(["joblog"] if which("scontrol") else [])]


@dataclass
class _Built:
    """What build_sources wires: polled, streaming, shutdown hooks, NVML's PCI map."""

    polled: list[Any] = field(default_factory=list)
    streaming: list[Any] = field(default_factory=list)
    on_stop: list[Callable[[], None]] = field(default_factory=list)
    gpu_map: Callable[[], dict[str, tuple[str, int]]] | None = None
    gpus_listed: Callable[[], bool] | None = None


class AfterGpuMap:
    """A streaming source started once NVML has listed the GPUs (or after `wait_s`).

    The kernel-log source reads the whole ring buffer as soon as it runs; started before NVML's
    first poll, those records would miss the PCI -> GPU UUID/index map.
    """

    def __init__(self, inner: Any, ready: Callable[[], bool], wait_s: float = 10.0) -> None:
        self.inner, self.ready, self.wait_s = inner, ready, wait_s
        self.name: str = inner.name

    def run(self, emit: Callable[[Any], None], stop: threading.Event) -> None:
        """Wait for the map (bounded), then run the inner source until `stop`."""
        deadline = time.monotonic() + self.wait_s
        while not self.ready() and time.monotonic() < deadline:
            if stop.wait(0.05):
                return
        self.inner.run(emit, stop)


def _add_nvml(b: _Built, *, node: str, settings: Settings, opts: dict[str, Any]) -> None:
    from collector.agent import Polled
    from collector.nvml import NvmlSource
    from collector.nvml_events import NvmlEventSource
    from collector.procs import ProcessJobMapper

    nvml = _nvml_module(opts.get("fake_nvml", False), opts.get("fake_gpus", 1))
    mapper = ProcessJobMapper(settings.agent_proc_root)
    src = NvmlSource(nvml, node=node, slow_every=settings.agent_slow_every, proc_mapper=mapper)
    b.polled.append(Polled(src, opts.get("interval") or settings.agent_interval_s))
    b.streaming.append(NvmlEventSource(nvml, node=node))
    b.on_stop.append(src.close)
    b.gpu_map = src.gpu_map
    b.gpus_listed = lambda: bool(src.gpus)


def _add_kmsg(b: _Built, *, node: str, settings: Settings, state_dir: Path) -> None:
    from collector.kmsg import KmsgSource

    src = KmsgSource(
        node=node,
        kmsg_path=settings.agent_kmsg_path,
        state_path=state_dir / "kmsg-state.json",
        gpu_map=b.gpu_map,
    )
    b.streaming.append(src if b.gpus_listed is None else AfterGpuMap(src, b.gpus_listed))


def _add_dcgm(b: _Built, *, node: str, settings: Settings, url: str | None) -> None:
    import httpx

    from collector.agent import Polled
    from collector.dcgm import DcgmSource

    client = httpx.Client()
    src = DcgmSource(node=node, client=client, url=url or settings.agent_dcgm_url)
    b.polled.append(Polled(src, settings.agent_dcgm_interval_s))
    b.on_stop.append(client.close)


def _add_joblog(b: _Built, *, node: str, settings: Settings, runner: Any) -> None:
    from collector.joblog import JobLogSource, SlurmJobLogs
    from collector.slurm.runner import SubprocessRunner

    runner = runner or SubprocessRunner(bin_dir=settings.agent_slurm_bin_dir)
    b.streaming.append(
        JobLogSource(
            node=node,
            targets=SlurmJobLogs(node=node, runner=runner),
            poll_s=settings.agent_joblog_poll_s,
        )
    )


def build_sources(
    *,
    names: list[str],
    node: str,
    settings: Settings,
    state_dir: Path,
    runner: Any = None,
    **opts: Any,
) -> _Built:
    """The sources named on the command line, wired (NVML first: others map PCI ids with it).

    `opts`: interval, replay, replay_speed, fake_nvml, fake_gpus, dcgm_url. `runner` runs
    scontrol for the job-log source (default: a subprocess runner).
    """
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise typer.BadParameter(f"unknown source {unknown[0]!r} ({', '.join(SOURCES)})")
    b = _Built()
    for name in sorted(set(names), key=SOURCES.index):
        if name == "nvml":
            _add_nvml(b, node=node, settings=settings, opts=opts)
        elif name == "kmsg":
            _add_kmsg(b, node=node, settings=settings, state_dir=state_dir)
        elif name == "dcgm":
            _add_dcgm(b, node=node, settings=settings, url=opts.get("dcgm_url"))
        elif name == "joblog":
            _add_joblog(b, node=node, settings=settings, runner=runner)
        else:
            from collector.replay import ReplaySource

            replay = opts.get("replay")
            if replay is None:
                raise typer.BadParameter("--source replay needs --replay FILE")
            speed = opts.get("replay_speed", 1.0)
            b.streaming.append(ReplaySource(replay, node=node, speed=speed, loop=True))
    return b


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
        bisect_after=settings.agent_bisect_after,
    )
    built = build_sources(node=node_name, settings=settings, state_dir=spool_path.parent, **sources)
    the_agent = Agent(
        spool=the_spool,
        delivery=delivery,
        polled=built.polled,
        streaming=built.streaming,
        flush_interval_s=settings.agent_flush_interval_s,
        on_stop=built.on_stop,
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
            None,
            help="Sources: nvml, kmsg, dcgm, joblog, replay (repeatable; "
            "default nvml + kmsg, + joblog when scontrol is on PATH).",
        ),
        dcgm_url: str = typer.Option(
            None, help="dcgm-exporter metrics URL (default http://127.0.0.1:9400/metrics)."
        ),
        replay: Path = typer.Option(None, help="JSONL file for --source replay."),
        replay_speed: float = typer.Option(1.0, help="Replay pace (1 = recorded, 0 = max)."),
        fake_nvml: bool = typer.Option(False, help="Use the recorded-H100 fake NVML (demo)."),
        fake_gpus: int = typer.Option(1, help="GPUs the fake NVML simulates."),
    ) -> None:
        """Run the node agent until SIGTERM/SIGINT; everything is spooled before delivery."""
        settings = Settings()
        sources = {
            "names": source or default_sources(),
            "interval": interval or settings.agent_interval_s,
            "dcgm_url": dcgm_url,
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
