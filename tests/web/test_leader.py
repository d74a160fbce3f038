"""One leader among the server processes sharing a database: it alone runs the periodic work."""

from __future__ import annotations

import logging
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
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from timeline import db, lease
from timeline.db import unit_of_work
from timeline.errors import StaleLeader
from timeline.settings import Settings
from web.app import create_app
from web.leader import LeaseElector
from web.runtime import ServerRuntime

Factory = sessionmaker[Session]


def _wait(pred: Callable[[], object], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


class Calls:
    """What an elector told its runtime, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def elected(self, epoch: int) -> None:
        self.log.append(f"elected {epoch}")

    def deposed(self) -> None:
        self.log.append("deposed")


class Clock:
    """A monotonic clock the test moves by hand (a paused process sees time jump)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


_MADE: list[LeaseElector] = []


@pytest.fixture(autouse=True)
def _stop_every_elector() -> Iterator[None]:
    """A test that fails mid-way must not leave an elector leading the shared test database."""
    yield
    while _MADE:
        _MADE.pop().stop()


def _elector(factory: Factory, calls: Calls, holder: str, **kw: object) -> LeaseElector:
    made = LeaseElector(
        factory,
        on_elected=calls.elected,
        on_deposed=calls.deposed,
        holder=holder,
        **kw,  # type: ignore[arg-type]
    )
    _MADE.append(made)
    return made


def test_only_one_elector_leads_and_another_takes_over_when_it_stops(
    session_factory: Factory,
) -> None:
    a_calls, b_calls = Calls(), Calls()
    # The lease (30 s) outlasts every wait below: b can only lead early if a released it.
    a = _elector(session_factory, a_calls, "a", lease_s=30.0, renew_s=0.1)
    b = _elector(session_factory, b_calls, "b", lease_s=30.0, renew_s=0.1)
    a.start()
    assert _wait(a.elected.is_set)
    b.start()
    time.sleep(0.6)  # b tries ~6 times; it must not lead while a renews
    assert a_calls.log == ["elected 1"] and b_calls.log == [] and not b.leading
    a.stop()  # a clean stop releases the lease: b need not wait 30 s for it to expire
    assert _wait(b.elected.is_set, timeout=10.0)
    assert a_calls.log == ["elected 1", "deposed"] and b_calls.log == ["elected 2"]
    b.stop()


def test_a_leader_paused_past_its_deadline_steps_down_before_anything_else(
    session_factory: Factory,
) -> None:
    clock, calls = Clock(), Calls()
    a = _elector(session_factory, calls, "a", lease_s=15.0, renew_s=2.0, clock=clock)
    a.tick()
    assert calls.log == ["elected 1"]
    clock.now += 16.0  # paused (SIGSTOP) longer than the lease
    a.tick()
    # It stops first; the store then says nobody took over, so it leads on in the same epoch.
    assert calls.log == ["elected 1", "deposed", "elected 1"]


def test_a_leader_that_lost_the_lease_steps_down_at_its_next_round(
    session_factory: Factory,
) -> None:
    clock, a_calls, b_calls = Clock(), Calls(), Calls()
    a = _elector(session_factory, a_calls, "a", lease_s=0.3, renew_s=0.1, clock=clock)
    b = _elector(session_factory, b_calls, "b", lease_s=15.0, renew_s=2.0)
    a.tick()
    time.sleep(0.45)  # the store's lease expires; a's own clock has not moved (it was paused)
    b.tick()
    assert b_calls.log == ["elected 2"]
    a.tick()
    assert a_calls.log == ["elected 1", "deposed"] and not a.leading


def test_a_leader_that_cannot_reach_the_store_steps_down_at_its_deadline(
    session_factory: Factory, tmp_path: Path
) -> None:
    clock, calls = Clock(), Calls()
    a = _elector(session_factory, calls, "a", lease_s=15.0, renew_s=2.0, clock=clock)
    a.tick()
    unmigrated = db.make_engine(f"sqlite:///{tmp_path / 'empty.db'}")  # no lease table: errors
    a.factory = db.make_sessionmaker(unmigrated)
    clock.now += 10.0
    a.tick()
    assert calls.log == ["elected 1"]  # renewal failed, but the deadline has not passed
    clock.now += 6.0
    a.tick()
    assert calls.log == ["elected 1", "deposed"]
    unmigrated.dispose()


def test_a_failing_start_of_the_work_does_not_end_the_election(session_factory: Factory) -> None:
    def broken_start(epoch: int) -> None:
        raise RuntimeError("the scheduler could not start")

    a = LeaseElector(
        session_factory, on_elected=broken_start, on_deposed=lambda: None, holder="a",
        lease_s=5.0, renew_s=0.1,
    )  # fmt: skip
    _MADE.append(a)
    a.start()
    assert _wait(a.elected.is_set)
    with session_factory() as s:
        first = lease.current(s)
    time.sleep(0.5)
    with session_factory() as s:
        later = lease.current(s)
    a.stop()
    assert first is not None and later is not None and later.expires_ts > first.expires_ts


def test_renewal_must_come_before_the_lease_runs_out(session_factory: Factory) -> None:
    with pytest.raises(ValueError, match="renew_s"):
        _elector(session_factory, Calls(), "a", lease_s=2.0, renew_s=2.0)


def test_the_runtime_runs_its_jobs_only_while_leading_and_again_in_a_new_term(
    session_factory: Factory,
) -> None:
    runtime = ServerRuntime(session_factory)
    runs: list[float] = []
    runtime.add("tick", lambda: runs.append(time.monotonic()), 0.05)
    time.sleep(0.2)
    assert runs == []  # not leading: nothing runs
    runtime.start_leading(1)
    assert _wait(lambda: len(runs) >= 2)
    runtime.stop_leading()
    stopped = len(runs)
    time.sleep(0.2)
    assert len(runs) == stopped
    runtime.start_leading(2)
    assert _wait(lambda: len(runs) >= stopped + 2)
    runtime.stop_leading()


def test_a_job_slower_than_its_interval_is_skipped_without_a_warning_each_time(
    session_factory: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = ServerRuntime(session_factory)
    runs: list[float] = []
    runtime.add("slow", lambda: (runs.append(time.monotonic()), time.sleep(0.5)), 0.05)
    with caplog.at_level(logging.WARNING):
        runtime.start_leading(1)
        try:
            assert _wait(lambda: len(runs) >= 2)  # ten intervals per run: most are skipped
        finally:
            runtime.stop_leading()
    assert not [r for r in caplog.records if r.name.startswith("apscheduler")], caplog.text


def test_the_runtime_fence_refuses_a_write_once_another_replica_leads(
    session_factory: Factory,
) -> None:
    runtime = ServerRuntime(session_factory)
    with pytest.raises(StaleLeader, match="has not led"), unit_of_work(session_factory) as s:
        runtime.fence(s)
    a_calls, b_calls = Calls(), Calls()
    a = _elector(session_factory, a_calls, "a", lease_s=0.3, renew_s=0.1)
    a.on_elected = runtime.start_leading
    a.tick()
    assert runtime.epoch == 1
    with unit_of_work(session_factory) as s:
        runtime.fence(s)  # the leader's write passes
    time.sleep(0.45)
    _elector(session_factory, b_calls, "b", lease_s=15.0, renew_s=2.0).tick()
    with (
        pytest.raises(StaleLeader, match="epoch 1 no longer leads"),
        unit_of_work(session_factory) as s,
    ):
        runtime.fence(s)
    runtime.stop_leading()


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_metrics_say_which_process_leads(settings: Settings) -> None:
    app = create_app(settings)
    with TestClient(app) as client:
        assert _wait(app.state.leader.elected.is_set)
        text = client.get("/metrics").text
    assert "fleetmedic_leader 1.0" in text and "fleetmedic_leader_epoch 1.0" in text


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_a_server_stopping_cleanly_hands_over_without_waiting_for_expiry(
    settings: Settings,
) -> None:
    settings.leader_renew_s = 0.2  # the lease stays 15 s: a handover within 10 s is a release
    first, second = create_app(settings), create_app(settings)
    second_client = TestClient(second)
    with TestClient(first):
        assert _wait(first.state.leader.elected.is_set)
        second_client.__enter__()
        time.sleep(0.6)
        assert not second.state.leader.leading
    try:  # the first server has stopped
        assert not first.state.leader.leading
        assert _wait(second.state.leader.elected.is_set, timeout=10.0)
        assert second.state.leader.epoch == 2
    finally:
        second_client.__exit__(None, None, None)


@pytest.mark.slow
@pytest.mark.integration
def test_two_worker_server_ingests_and_exactly_one_worker_leads(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {
        "FLEETMEDIC_DATABASE_URL": f"sqlite:///{tmp_path / 'fm.db'}",
        "FLEETMEDIC_DATA_DIR": str(tmp_path),
        "FLEETMEDIC_AGENT_TOKENS": "tok",
    }
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "web.cli", "serve", "--port", str(port), "--workers", "2"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        assert _wait(lambda: _healthy(url), timeout=60), log.read_text()[-3000:]
        for i in range(6):
            batch = {"agent": "a", "node": "n1", "batch_id": f"leader-test-{i:04d}",
                     "samples": [{"ts": 1.0 + i, "gpu_uuid": "GPU-1", "util_gpu": 50}]}  # fmt: skip
            r = httpx.post(
                f"{url}/api/v1/ingest", json=batch, headers={"Authorization": "Bearer tok"}
            )
            assert r.status_code == 200, r.text
        assert _wait(lambda: "leads (lease epoch" in log.read_text(), timeout=10)
        time.sleep(4.5)  # the other worker tries every 2 s: give it the chance to (wrongly) lead
        assert log.read_text().count("leads (lease epoch") == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
