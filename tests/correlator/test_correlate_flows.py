"""The correlator's flow: a persisted cursor, ids that commit late, one replica at a time, and
the scheduling hook the server uses."""

from __future__ import annotations

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from correlator import service
from correlator.flows import CURSOR, LAST_HANG, LAST_IDLE, TOOK, correlate_once
from correlator.jobs import JOB_ID, run_correlator, schedule_correlator
from tests.correlator.correlator_fleet import XID79, Fleet
from timeline import db
from timeline import tables as t
from timeline.models import Event, EventKind, Severity
from timeline.settings import Settings


def _xid(ts: float, node: str = "n1") -> Event:
    return Event(ts=ts, node=node, source="kmsg", kind=EventKind.XID, code=79,
                 pci_bus_id="0000:44:00", severity=Severity.CRITICAL, raw=XID79)  # fmt: skip


def _row(event_id: int, ts: float, node: str) -> dict:
    return {
        "id": event_id, "ts": ts, "received_ts": ts, "node": node, "source": "kmsg",
        "kind": "xid", "code": 79, "pci_bus_id": "0000:44:00.0", "severity": "critical",
        "message": "", "raw": XID79, "payload": {}, "count": 1,
    }  # fmt: skip


def test_each_event_is_read_once_and_later_events_on_the_next_pass(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1"])
    fleet.events(_xid(1000.0), _xid(1001.0))
    first = fleet.correlate(now=1002.0)
    again = fleet.correlate(now=1003.0)
    fleet.events(_xid(1004.0))
    third = fleet.correlate(now=1005.0)
    assert (first.events_read, again.events_read, third.events_read) == (2, 0, 1)
    with session_factory() as s:
        (inc,) = service.list_incidents(s)
        assert service.get_state(s, name=CURSOR)["id"] == third.cursor
    assert inc.count == 3


def test_an_id_that_commits_after_a_higher_one_is_still_read(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1", "n2"])
    with session_factory.begin() as s:  # id 2 is still in flight while 1 and 3 are committed
        s.execute(t.events.insert(), [_row(1, 1000.0, "n1"), _row(3, 1000.0, "n1")])
    assert fleet.correlate(now=1001.0).events_read == 2
    with session_factory.begin() as s:
        s.execute(t.events.insert(), [_row(2, 1000.5, "n2")])
    assert fleet.correlate(now=1002.0).events_read == 1
    with session_factory() as s:
        nodes = {i.culprit_node for i in service.list_incidents(s)}
        assert service.get_state(s, name=CURSOR)["gaps"] == []
    assert nodes == {"n1", "n2"}


def test_a_gap_that_never_fills_is_given_up_after_the_settle_time(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    with session_factory.begin() as s:
        s.execute(t.events.insert(), [_row(5, 1000.0, "n1")])
    fleet.correlate(now=1001.0, correlator_settle_s=10.0)
    with session_factory() as s:
        assert service.get_state(s, name=CURSOR)["gaps"] == [[1, 4, 1001.0]]
    fleet.correlate(now=1020.0, correlator_settle_s=10.0)
    with session_factory() as s:
        assert service.get_state(s, name=CURSOR)["gaps"] == []


def test_a_second_replica_skips_while_one_holds_the_postgres_lock(
    session_factory: sessionmaker[Session],
) -> None:
    if session_factory.kw["bind"].dialect.name != "postgresql":
        pytest.skip("the advisory lock is PostgreSQL's; SQLite serializes writers itself")
    with session_factory() as holder:
        holder.execute(text("select pg_advisory_xact_lock(:k)"), {"k": 0x466C6D43})
        report = correlate_once(session_factory, settings=Settings(), now=1000.0)
        holder.rollback()
    assert report.skipped == "another replica is correlating" and report.events_read == 0


def test_schedule_correlator_adds_one_interval_job(
    session_factory: sessionmaker[Session],
) -> None:
    scheduler = BackgroundScheduler()
    scheduler.start(paused=True)
    settings = Settings(correlator_interval_s=3.0)
    schedule_correlator(scheduler, session_factory, settings)
    schedule_correlator(scheduler, session_factory, settings)  # a restart replaces, not doubles
    jobs = scheduler.get_jobs()
    scheduler.shutdown(wait=False)
    (job,) = jobs
    assert job.id == JOB_ID and job.trigger.interval.total_seconds() == 3.0
    assert job.max_instances == 1
    assert run_correlator(session_factory, settings) is not None


def test_a_failing_pass_is_logged_and_returns_none(
    tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    unmigrated = db.make_sessionmaker(db.make_engine(f"sqlite:///{tmp_path}/empty.db"))
    assert run_correlator(unmigrated, Settings()) is None
    assert "correlator pass failed" in caplog.text


def test_a_malformed_payload_neither_stops_the_pass_nor_hides_the_other_events(
    session_factory: sessionmaker[Session],
) -> None:
    if session_factory.kw["bind"].dialect.name != "sqlite":
        pytest.skip("PostgreSQL's JSON column refuses malformed JSON on insert")
    fleet = Fleet(session_factory)
    fleet.nodes(["n1"])
    fleet.job("j9", ["n1"], start=100.0)
    with session_factory.begin() as s:  # written by something other than our store API
        s.execute(
            text(
                "INSERT INTO events (ts, received_ts, node, source, kind, job_id, severity,"
                " message, payload, count) VALUES (999, 999, 'n1', 'slurm', 'job_state', 'j9',"
                " 'error', 'job j9 FAILED', '{not json', 1)"
            )
        )
    fleet.events(_xid(1000.0))
    report = fleet.correlate(now=1001.0)
    assert report.events_read == 2 and report.events_failed == 0
    with session_factory() as s:
        (inc,) = service.list_incidents(s)
    assert inc.code == 79 and inc.job_ids() == {"j9"}


def test_a_slow_telemetry_check_is_next_due_only_after_its_time_over_the_share(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1"])
    first = fleet.correlate(now=1000.0)
    assert set(first.checks_took_s) == {LAST_HANG, LAST_IDLE}
    with db.unit_of_work(session_factory) as s:  # as if the hang check had taken 10 s
        service.set_state(s, name=TOOK, value={LAST_HANG: 10.0, LAST_IDLE: 0.01}, now=1000.0)

    def last_hang() -> float:
        with session_factory() as s:
            return float(service.get_state(s, name=LAST_HANG))

    fleet.correlate(now=1020.0)  # past hang_interval_s (10 s), not past 10 s / 0.25
    assert last_hang() == 1000.0
    later = fleet.correlate(now=1041.0)
    assert last_hang() == 1041.0 and LAST_HANG in later.checks_took_s
    fleet.settings = fleet.settings.model_copy(update={"correlator_max_share": 1.0})
    with db.unit_of_work(session_factory) as s:
        service.set_state(s, name=TOOK, value={LAST_HANG: 10.0}, now=1041.0)
    fleet.correlate(now=1052.0)  # a share of 1: due again after max(10 s, 10 s / 1)
    assert last_hang() == 1052.0
