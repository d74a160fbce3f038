"""`fleetmedic agent` wiring: kmsg, DCGM and job-log sources built from the CLI's settings spool
their events (inputs: a kmsg file of real records, a recorded dcgm-exporter scrape served over
HTTP on 127.0.0.1, a job log named by a recorded `scontrol show job -d`)."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import typer

from collector.agent import Agent
from collector.slurm.runner import RecordedRunner
from collector.spool import Spool
from timeline.models import Event, EventKind
from timeline.settings import Settings
from web.cli.agent import build_sources, default_sources

FIX = Path(__file__).parent.parent / "fixtures"
SCRAPE = (FIX / "dcgm" / "lke_rtx4000ada_pod_labels.prom").read_text()
FAKE_GPU0 = "GPU-2a11160c-cbb9-41b1-5c0b-bd5856450051"  # the recorded H100 of FakeNvml, 0000:00:06


def _with_xid(text: str, xid: str) -> str:
    """The same exporter's next scrape: the real text with the last-Xid gauge changed."""
    lines = []
    for line in text.splitlines():
        if line.startswith("DCGM_FI_DEV_XID_ERRORS{"):
            line = line.rsplit(" ", 1)[0] + " " + xid
        lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.fixture
def exporter() -> Iterator[str]:
    """A dcgm-exporter stand-in on 127.0.0.1: the recorded scrape, then one with Xid 48."""
    bodies = [SCRAPE, _with_xid(SCRAPE, "48")]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (bodies.pop(0) if len(bodies) > 1 else bodies[0]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def _spooled_events(path: Path) -> list[Event]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT body FROM items WHERE kind = 'events'").fetchall()
    return [Event.model_validate_json(r[0]) for r in rows]


def _until(cond: Callable[[], bool], limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_agent_with_kmsg_dcgm_and_joblog_spools_events_from_each(
    tmp_path: Path, exporter: str
) -> None:
    kmsg = tmp_path / "kmsg"
    shutil.copy(FIX / "kernel" / "kmsg_records.txt", kmsg)
    log = tmp_path / "multi-1.out"
    shutil.copy(FIX / "joblog" / "h100_torch_cuda_oom.stderr", log)
    scontrol = (FIX / "slurm" / "scontrol_show_job_d_multinode.txt").read_text()
    runner = RecordedRunner(
        replies={"scontrol show job": scontrol.replace("/tmp/fm-slurm-dev/jobs", str(tmp_path))}
    )
    settings = Settings(
        agent_kmsg_path=str(kmsg), agent_dcgm_interval_s=0.2, agent_joblog_poll_s=0.1
    )
    built = build_sources(
        names=["joblog", "dcgm", "kmsg", "nvml"],
        node="node1",  # the batch host of the recorded jobs
        settings=settings,
        state_dir=tmp_path,
        runner=runner,
        interval=0.2,
        fake_nvml=True,
        dcgm_url=exporter,
    )
    spool_path = tmp_path / "spool.db"
    agent = Agent(
        spool=Spool(spool_path),
        delivery=None,
        polled=built.polled,
        streaming=built.streaming,
        on_stop=built.on_stop,
    )
    agent.start()
    try:
        _until(
            lambda: {e.source for e in _spooled_events(spool_path)} >= {"kmsg", "dcgm", "joblog"}
        )
    finally:
        agent.stop()
    events = _spooled_events(spool_path)
    xid31 = next(e for e in events if e.source == "kmsg" and e.code == 31)
    assert xid31.gpu_uuid == FAKE_GPU0  # kmsg mapped the PCI id with what NVML said
    dcgm = next(e for e in events if e.source == "dcgm")
    assert dcgm.kind is EventKind.XID and dcgm.code == 48 and dcgm.node == "node1"
    oom = next(e for e in events if e.source == "joblog")
    assert oom.kind is EventKind.CUDA_OOM and oom.job_id == "1"
    assert agent.running_threads() == [] and agent.health.errors == {}


def test_default_sources_add_job_logs_only_where_scontrol_is() -> None:
    assert default_sources(which=lambda _: None) == ["nvml", "kmsg"]
    assert default_sources(which=lambda name: f"/usr/bin/{name}") == ["nvml", "kmsg", "joblog"]


def test_unknown_source_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(typer.BadParameter, match=r"unknown source 'gpud'.*dcgm, joblog"):
        build_sources(names=["gpud"], node="n", settings=Settings(), state_dir=tmp_path)
