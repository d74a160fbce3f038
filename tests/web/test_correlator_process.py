"""The leader's correlator passes in a child process: replaced when grown, dead or hung."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator

import psutil
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.orm import sessionmaker

from tests.web.test_actions_api import _batch
from timeline.settings import Settings
from web.app import create_app
from web.correlator_process import CorrelatorProcess
from web.runtime import ServerRuntime
from web.wiring import configure_runtime

pytestmark = pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
AGENT = {"Authorization": "Bearer agent-secret-token"}


@pytest.fixture()
def child(settings: Settings) -> Iterator[CorrelatorProcess]:
    """Passes in a child on the test database; a generous cap and timeout unless a test sets."""
    proc = CorrelatorProcess(settings, max_rss_mb=10_000.0, timeout_s=120.0)
    yield proc
    proc.close()


def _ingest_xid(settings: Settings) -> None:
    """A real Xid 79 under a running job, stored through the API (no periodic jobs here)."""
    with TestClient(create_app(settings)) as client:
        assert client.post("/api/v1/ingest", json=_batch(), headers=AGENT).status_code == 200


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_pass_runs_in_another_process_and_opens_the_incident_its_events_show(
    settings: Settings, child: CorrelatorProcess
) -> None:
    _ingest_xid(settings)
    report = child.run_pass()
    assert report is not None and report.incidents_opened >= 1
    assert child.pid is not None and child.pid != os.getpid() and psutil.pid_exists(child.pid)
    again = child.run_pass()  # the cursor moved: the same events open nothing twice
    assert again is not None and again.incidents_opened == 0
    assert child.started == 1


def test_a_child_over_its_memory_cap_is_replaced_after_its_pass(
    settings: Settings, child: CorrelatorProcess, caplog: pytest.LogCaptureFixture
) -> None:
    assert child.run_pass() is not None
    first = child.pid
    assert first is not None
    child.max_rss_mb = 1.0  # any interpreter is larger: replaced after every pass
    with caplog.at_level(logging.INFO, logger="web.correlator_process"):
        assert child.run_pass() is not None
    assert child.pid is None and _gone(first)  # stopped once its pass was answered
    assert f"correlator process {first} at" in caplog.text and "over 1 MB: replaced" in caplog.text
    assert child.run_pass() is not None
    assert child.started == 2


def test_a_child_that_dies_costs_one_pass_and_the_next_goes_on_from_the_cursor(
    settings: Settings, child: CorrelatorProcess, caplog: pytest.LogCaptureFixture
) -> None:
    assert child.run_pass() is not None
    dead = child.pid
    assert dead is not None
    os.kill(dead, signal.SIGKILL)
    _ingest_xid(settings)
    with caplog.at_level(logging.ERROR, logger="web.correlator_process"):
        assert child.run_pass() is None
    assert f"correlator process {dead} died" in caplog.text
    report = child.run_pass()  # a new child reads the events the dead one never saw
    assert report is not None and report.incidents_opened >= 1
    assert child.pid != dead and child.started == 2


def test_a_hung_pass_is_killed_after_its_timeout_and_the_next_runs_in_a_new_child(
    settings: Settings, child: CorrelatorProcess, caplog: pytest.LogCaptureFixture
) -> None:
    assert child.run_pass() is not None
    hung = child.pid
    assert hung is not None
    os.kill(hung, signal.SIGSTOP)  # alive, holding its pipe, never answering
    child.timeout_s = 1.0
    with caplog.at_level(logging.ERROR, logger="web.correlator_process"):
        assert child.run_pass() is None
    assert "gave no answer in 1 s" in caplog.text
    assert _gone(hung)
    child.timeout_s = 120.0
    assert child.run_pass() is not None and child.pid != hung


def test_the_server_correlates_in_a_child_and_stops_it_when_its_term_ends(
    settings: Settings, engine: Engine
) -> None:
    _ingest_xid(settings)
    runtime = ServerRuntime(sessionmaker(bind=engine))
    configure_runtime(runtime, settings)  # correlator_process is on by default
    runtime.jobs["correlator"]()
    (close,) = runtime.closers
    proc = close.__self__  # type: ignore[attr-defined]
    assert isinstance(proc, CorrelatorProcess)
    pid = proc.pid
    assert pid is not None and psutil.pid_exists(pid)
    with engine.connect() as conn:
        opened = conn.execute(text("select count(*) from incidents")).scalar_one()
    assert opened >= 1
    runtime.stop_leading()
    assert proc.pid is None and _gone(pid)


@pytest.mark.parametrize(
    ("process", "url"), [(False, None), (True, "sqlite://"), (True, "sqlite:///:memory:")]
)
def test_the_server_correlates_in_its_own_process_when_off_or_on_an_in_memory_database(
    settings: Settings, engine: Engine, process: bool, url: str | None
) -> None:
    settings.correlator_process = process
    if url is not None:
        settings.database_url = url  # a child would open an empty database of its own
    runtime = ServerRuntime(sessionmaker(bind=engine))
    configure_runtime(runtime, settings)
    assert "correlator" in runtime.jobs and runtime.closers == []
