"""The healer's loop: one runner per database does the work, a wake-up runs a pass at once,
and stopping is prompt."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from healer.jobs import HealerRunner
from healer.policy import PolicyFile
from tests.healer.helpers import XID79, by_kind, cluster, fault


def runner(engine: Engine, factory: sessionmaker[Session], lock_dir: Path) -> HealerRunner:
    return HealerRunner(
        factory,
        engine=engine,
        policy=PolicyFile(None),
        actors={},
        lock_dir=lock_dir,
        interval_s=3600.0,
    )


def test_a_second_healer_on_the_same_database_does_nothing(
    engine: Engine, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    lock_dir = tmp_path
    first, second = (
        runner(engine, session_factory, lock_dir),
        runner(engine, session_factory, lock_dir),
    )
    try:
        assert first.run_once().skipped is None
        assert second.run_once().skipped == "another healer holds this database"
    finally:
        first.lock.release()
        second.lock.release()


def test_a_wake_up_runs_a_pass_at_once_and_stop_is_prompt(
    engine: Engine, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    cluster(session_factory, nodes=["node1"])
    healer = runner(engine, session_factory, tmp_path)
    stop = threading.Event()
    thread = threading.Thread(target=healer.loop, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while healer.last is None and time.monotonic() < deadline:
        time.sleep(0.02)
    fault(session_factory, XID79, node="node1", ts=time.time())
    healer.wake.set()  # what the server does after a correlator pass that opened an incident
    deadline = time.monotonic() + 10
    while "drain" not in by_kind(session_factory) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert by_kind(session_factory)["drain"][0].mode.value == "observe"
    started = time.monotonic()
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive() and time.monotonic() - started < 2.0
    assert not healer.lock.held  # released on the way out
