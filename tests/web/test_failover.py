"""Two real server replicas on one PostgreSQL: the leader is SIGKILLed or paused (SIGSTOP) past
its lease in the middle of a fenced write; the other takes over within 30 s, and the old
leader's write is never stored (a paused one is refused with StaleLeader when it wakes)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from tests.conftest import PG_ADMIN_URL
from timeline import db

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
TAKEOVER_LIMIT_S = 30.0
PROBE_TABLE = """CREATE TABLE probe_writes (
    id BIGSERIAL PRIMARY KEY, replica TEXT NOT NULL, epoch BIGINT NOT NULL, seq INT NOT NULL,
    ts DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM clock_timestamp()))"""


def _until(what: str, cond: Callable[[], object], limit_s: float = 60.0) -> float:
    """Wait for `cond`; returns the monotonic time it first held."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            if cond():
                return time.monotonic()
        except (OSError, httpx.HTTPError):
            pass  # not there yet (log not written, server starting)
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {limit_s:.0f} s waiting for: {what}")
        time.sleep(0.05)


class Replica:
    """One `fleetmedic serve` process (with the fenced probe job) and its logs."""

    def __init__(self, name: str, tmp: Path, database_url: str) -> None:
        self.name, self.tmp = name, tmp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.probe_log = tmp / f"probe-{name}.log"
        self.server_log = tmp / f"server-{name}.log"
        env = os.environ | {
            "FLEETMEDIC_DATABASE_URL": database_url,
            "FLEETMEDIC_DATA_DIR": str(tmp / name),
            "FLEETMEDIC_AGENT_TOKENS": "failover-token",
            "PROBE_LOG": str(self.probe_log),
            "REPLICA_NAME": name,
            "PYTHONPATH": str(ROOT),
        }
        with self.server_log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.web.replica_server", str(self.port)],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.port}/healthz"
        return httpx.get(url, timeout=1).status_code == 200

    def probe(self) -> list[list[str]]:
        """The probe's log: [what, epoch, seq, ts] per line."""
        if not self.probe_log.exists():
            return []
        return [line.split() for line in self.probe_log.read_text().splitlines()]

    def committed(self) -> list[list[str]]:
        """The probe runs whose fenced write committed."""
        return [p for p in self.probe() if p[0] == "committed"]

    def mid_write(self) -> list[str] | None:
        """The probe run between its insert and its fence (a 2 s window), if any."""
        lines = self.probe()
        return lines[-1] if lines and lines[-1][0] == "working" else None

    def log(self) -> str:
        return self.server_log.read_text(errors="replace")


@pytest.fixture()
def database_url(pg_database_url: str) -> Iterator[str]:
    """A PostgreSQL database of its own (the probe table must not reach the shared one)."""
    del pg_database_url  # requested for its skip-or-fail check of PostgreSQL only
    with db.scratch_database("postgres", pg_url=PG_ADMIN_URL, prefix="fm_failover") as url:
        db.upgrade(url)
        engine = db.make_engine(url)
        with engine.begin() as conn:
            conn.execute(text(PROBE_TABLE))
        engine.dispose()
        yield url


@pytest.fixture()
def replicas(database_url: str, tmp_path: Path) -> Iterator[list[Replica]]:
    """Replica a (started first, so it leads) and replica b, both up."""
    started: list[Replica] = []
    try:
        a = Replica("a", tmp_path, database_url)
        started.append(a)
        _until("a serves", a.healthy)
        _until("a leads and writes", a.committed)
        b = Replica("b", tmp_path, database_url)
        started.append(b)
        _until("b serves", b.healthy)
        yield started
    finally:
        for r in started:
            if r.proc.poll() is None:
                os.kill(r.proc.pid, signal.SIGCONT)
                r.proc.kill()
            r.proc.wait(30)
        for r in started:  # shown when a test fails
            print(f"--- replica {r.name} server log (tail) ---\n{r.log()[-3000:]}")
            print(f"--- replica {r.name} probe log (tail) ---\n{r.probe_log.read_text()[-800:]}")


def _rows(url: str) -> list[tuple[int, str, int, int]]:
    engine = db.make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id, replica, epoch, seq FROM probe_writes ORDER BY id"))
        out = [(int(i), str(r), int(e), int(s)) for i, r, e, s in rows]
    engine.dispose()
    return out


def _assert_one_leader_at_a_time(rows: list[tuple[int, str, int, int]]) -> None:
    """In commit order, the epochs never go back: no write of an old term after a new one."""
    epochs = [epoch for _, _, epoch, _ in rows]
    assert epochs == sorted(epochs), rows
    by_epoch = {epoch: {replica for _, replica, e, _ in rows if e == epoch} for epoch in epochs}
    assert all(len(names) == 1 for names in by_epoch.values()), by_epoch


def _kill_mid_write(leader: Replica, sig: int) -> tuple[list[str], float]:
    """Send `sig` while the leader's probe is between its insert and its fenced commit.

    Returns the probe run in flight and the wall-clock time of the signal.
    """
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        run = leader.mid_write()
        # Well inside the probe's 2 s between its insert and its fence, even on a loaded host.
        if run is not None and time.time() - float(run[3]) < 0.5:
            os.kill(leader.proc.pid, sig)
            return run, time.time()
        time.sleep(0.02)
    pytest.fail(f"{leader.name} was never caught in the middle of a fenced write")


def _failover(
    new: Replica, signalled: float, what: str, record: Callable[[str, object], None]
) -> float:
    """Wait for the new leader's first fenced write; record the seconds from the signal to its
    first run as leader (takeover, returned) and to that write's commit."""
    _until(f"{new.name}'s first fenced write", new.committed, limit_s=TAKEOVER_LIMIT_S)
    took_over = float(new.probe()[0][3]) - signalled
    first_write = float(new.committed()[0][3]) - signalled
    record(f"takeover_after_{what}_s", round(took_over, 2))
    record(f"first_fenced_write_after_{what}_s", round(first_write, 2))
    print(f"{what}: takeover {took_over:.2f} s, first fenced write {first_write:.2f} s")
    assert first_write < TAKEOVER_LIMIT_S
    return took_over


def test_sigkilled_leader_is_replaced_within_30_s_and_its_write_is_lost(
    replicas: list[Replica], database_url: str, record_property: Callable[[str, object], None]
) -> None:
    a, b = replicas
    assert not b.committed(), "b wrote while a led"
    (_, epoch, seq, _), killed = _kill_mid_write(a, signal.SIGKILL)
    assert _failover(b, killed, "sigkill", record_property) < TAKEOVER_LIMIT_S
    rows = _rows(database_url)
    assert ("a", int(epoch), int(seq)) not in [(r, e, s) for _, r, e, s in rows]
    _assert_one_leader_at_a_time(rows)
    assert int(b.committed()[0][1]) > int(epoch)


def test_paused_leader_is_replaced_and_its_writes_are_refused_when_it_wakes(
    replicas: list[Replica], database_url: str, record_property: Callable[[str, object], None]
) -> None:
    a, b = replicas
    (_, epoch, seq, _), paused = _kill_mid_write(a, signal.SIGSTOP)
    assert _failover(b, paused, "sigstop", record_property) < TAKEOVER_LIMIT_S
    _until("b has led a while", lambda: len(b.committed()) >= 3)
    os.kill(a.proc.pid, signal.SIGCONT)

    # The write a had begun under its old epoch is refused by the fence when it wakes up...
    refused = ["refused", epoch, seq]
    _until("a's in-flight write refused", lambda: refused in [p[:3] for p in a.probe()], 20)
    # ...and a steps down instead of leading on.
    _until("a steps down", lambda: f"steps down from epoch {epoch}" in a.log(), 20)
    a_done = len(a.committed())
    b_before = len(b.committed())
    _until("b keeps leading", lambda: len(b.committed()) >= b_before + 3, 20)
    assert len(a.committed()) == a_done, "a wrote again after it lost the lease"
    rows = _rows(database_url)
    assert ("a", int(epoch), int(seq)) not in [(r, e, s) for _, r, e, s in rows]
    _assert_one_leader_at_a_time(rows)
    assert a.proc.poll() is None, "the paused replica must carry on serving, not crash"
    _until("a serves again", a.healthy, 20)
