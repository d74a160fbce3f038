"""THE spool test: real server and real agent processes; server stopped, agent SIGKILLed and
restarted, server back -> every sample the agent produced is stored exactly once."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
FLEETMEDIC = [sys.executable, "-m", "web.cli"]
TOKEN = "spool-test-token"
# The server stages new samples before filing them in `samples` (timeline.samples_stage).
ALL_SAMPLES = (
    "(SELECT gpu_id, ts_ms FROM samples UNION ALL SELECT gpu_id, ts_ms FROM samples_staged)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# generous: the bound only decides how soon a real failure is reported; on two cores shared with
# other suites (load 6) a 30 s bound was once not enough for the processes to start and deliver
def _until(what: str, cond: Callable[[], bool], limit_s: float = 90.0) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            if cond():
                return
        except (sqlite3.Error, httpx.HTTPError, KeyError):
            pass  # not there yet (file not created, server starting)
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for: {what}")
        time.sleep(0.1)


class Rig:
    """Paths, environment and the two processes of one run."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = _free_port()
        self.db = tmp / "server.db"
        self.spool = tmp / "spool.db"
        self.env = {
            **os.environ,
            "FLEETMEDIC_DATABASE_URL": f"sqlite:///{self.db}",
            "FLEETMEDIC_AGENT_TOKENS": TOKEN,
            "FLEETMEDIC_AGENT_TOKEN": TOKEN,
            "FLEETMEDIC_DATA_DIR": str(tmp),
            "FLEETMEDIC_AGENT_FLUSH_INTERVAL_S": "0.3",
        }
        self.procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        out = open(self.tmp / log, "ab")  # noqa: SIM115 (lives as long as the process)
        proc = subprocess.Popen(
            FLEETMEDIC + args, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        return proc

    def server(self) -> subprocess.Popen[bytes]:
        proc = self._spawn(["serve", "--port", str(self.port)], "server.log")
        url = f"http://127.0.0.1:{self.port}/api/v1/nodes"
        _until("server up", lambda: httpx.get(url, timeout=1).status_code == 200)
        return proc

    def agent(self) -> subprocess.Popen[bytes]:
        args = ["agent", "--server", f"http://127.0.0.1:{self.port}", "--node", "spool-node"]
        args += ["--interval", "0.2", "--fake-nvml", "--fake-gpus", "2"]
        return self._spawn([*args, "--spool", str(self.spool)], "agent.log")

    def produced(self) -> int:
        with sqlite3.connect(f"file:{self.spool}?mode=ro", uri=True) as c:
            row = c.execute("SELECT value FROM counters WHERE name='produced_samples'").fetchone()
            return int(row[0]) if row else 0

    def pending_batches(self) -> list[str]:
        with sqlite3.connect(f"file:{self.spool}?mode=ro", uri=True) as c:
            return [r[0] for r in c.execute("SELECT batch_id FROM batches")]

    def stored(self) -> int:
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as c:
            return int(c.execute(f"SELECT count(*) FROM {ALL_SAMPLES}").fetchone()[0])

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    try:
        yield r
    finally:
        r.stop_all()


def _stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    proc.send_signal(sig)
    proc.wait(timeout=20)


def test_every_sample_is_stored_exactly_once_across_outage_and_sigkill(rig: Rig) -> None:
    server = rig.server()
    agent = rig.agent()
    _until("first samples stored", lambda: rig.stored() >= 4)

    _stop(server, signal.SIGTERM)  # server gone: the agent keeps spooling
    at_outage = rig.produced()
    _until("agent spools during the outage", lambda: rig.produced() >= at_outage + 10)

    _until("a batch formed and waiting", lambda: bool(rig.pending_batches()))
    _stop(agent, signal.SIGKILL)  # no chance to flush or clean up
    killed_at = rig.produced()
    formed_before_kill = rig.pending_batches()
    agent = rig.agent()
    _until("restarted agent produces", lambda: rig.produced() >= killed_at + 4)

    rig.server()
    _until("backlog delivered", lambda: rig.stored() >= rig.produced() - 4)
    _stop(agent, signal.SIGTERM)  # clean stop: its last round delivers what is left

    produced = rig.produced()
    with sqlite3.connect(rig.spool) as c:
        left = c.execute("SELECT count(*) FROM items WHERE kind='samples'").fetchone()[0]
        counters = dict(c.execute("SELECT name, value FROM counters").fetchall())
    assert left == 0, "spool not drained"
    assert counters.get("dropped_samples", 0) == 0 and counters.get("quarantined_items", 0) == 0
    assert counters["delivered_samples"] == produced
    with sqlite3.connect(rig.db) as c:
        stored, distinct = c.execute(
            f"SELECT count(*), count(DISTINCT gpu_id || '@' || ts_ms) FROM {ALL_SAMPLES}"
        ).fetchone()
    assert produced > killed_at > at_outage > 0
    assert stored == produced  # exactly once: nothing lost, nothing twice
    assert distinct == stored
    with sqlite3.connect(rig.db) as c:
        ingested = {r[0] for r in c.execute("SELECT batch_id FROM ingest_batches")}
    assert set(formed_before_kill) <= ingested  # re-sent after the kill under the same ids
