"""The idle check reads the whole idle window only cold; a warm pass reads what came since the
previous one (plus LATE_S of late telemetry) and reaches the findings a cold pass reaches, on
the REAL H100 idle/busy trace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from correlator import flows, idle, service
from tests.correlator.correlator_fleet import Fleet
from tests.correlator.test_idle_findings import BUSY, HELD, IDLE, T0, _fleet, _samples
from timeline import samples
from timeline.db import unit_of_work

WINDOW = 1800.0 + 2 * 60.0 + 60.0  # what idle.detect reads cold, on the default settings


class _Recorded:
    """The real sample store, noting the windows the idle check asked it for: reads of
    utilization alone, or of the newest rows' times alone (the hang check reads both with
    power)."""

    def __init__(self, real: samples.SampleStore) -> None:
        self.real = real
        self.idle_reads: list[tuple[str, float]] = []

    def window_stats(self, session: Session, **kw: Any) -> Any:
        if list(kw["fields"]) == ["util_gpu"]:
            self.idle_reads.append(("window_stats", kw["since"]))
        return self.real.window_stats(session, **kw)

    def newest(self, session: Session, **kw: Any) -> Any:
        if not kw["fields"]:
            self.idle_reads.append(("newest", kw["since"]))
        return self.real.newest(session, **kw)

    def last_above(self, session: Session, **kw: Any) -> Any:
        self.idle_reads.append(("last_above", kw["since"]))
        return self.real.last_above(session, **kw)

    def sinces(self) -> set[float]:
        return {since for _, since in self.idle_reads}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.fixture
def recorded() -> Iterator[_Recorded]:
    spy = _Recorded(samples.store())
    old = samples.use(spy)
    yield spy
    samples.use(old)


def _open(session_factory: sessionmaker[Session]) -> dict[Any, Any]:
    with session_factory() as s:
        return {f.gpu_index: f for f in service.list_idle_findings(s, state="open")}


def _streamed(session_factory: sessionmaker[Session]) -> Fleet:
    """_fleet's jobs, with telemetry delivered as it is sampled (not ahead of the passes)."""
    fleet = Fleet(session_factory)
    fleet.nodes(["n1", "n2"])
    fleet.job("idle-job", ["n1"], start=T0, gpus=[0, 1], user="gina", account="vision")
    fleet.job("busy-job", ["n2"], start=T0, gpus=[0, 1], user="hank", account="nlp")
    return fleet


def test_warm_idle_passes_read_the_last_minute_and_late_telemetry_and_open_what_cold_does(
    session_factory: sessionmaker[Session], recorded: _Recorded
) -> None:
    fleet = _streamed(session_factory)
    opened_at, prev = None, None
    for now in [T0 + 600.0 + 60.0 * k for k in range(26)]:  # a pass a minute, to T0 + 2100
        start = T0 if prev is None else prev + 10.0  # one sample every 10 s
        fleet.samples("n1", _samples("n1", [0, 1], IDLE + HELD, start, now + 0.5))
        fleet.samples("n2", _samples("n2", [0, 1], BUSY, start, now + 0.5))
        recorded.idle_reads.clear()
        report = fleet.correlate(now=now)
        if report.idle_opened:  # the new findings' peak: their idle span, after its start
            opened_at = opened_at or now
            recorded.idle_reads.remove(("window_stats", T0 + 0.001))
        assert recorded.sinces() == {now - WINDOW if prev is None else prev - idle.LATE_S}
        if prev is not None:  # warm: the newest rows and busy samples, no window statistics
            assert sorted(n for n, _ in recorded.idle_reads) == ["last_above", "newest"]
        prev = now
    assert opened_at == T0 + 1800.0  # the first pass with 30 minutes of idle samples
    found = _open(session_factory)
    assert sorted(found) == [0, 1]
    assert {f.idle_since_ts for f in found.values()} == {T0}
    assert {f.max_util for f in found.values()} == {0.0}
    assert {f.last_seen_ts for f in found.values()} == {T0 + 2100.0}


def test_a_pass_that_finds_telemetry_newer_than_itself_reads_those_gpus_windows(
    session_factory: sessionmaker[Session], recorded: _Recorded
) -> None:
    fleet = _fleet(session_factory)  # every sample to T0 + 2100 is stored before any pass
    fleet.correlate(now=T0 + 1200.0)
    recorded.idle_reads.clear()
    assert fleet.correlate(now=T0 + 1260.0, idle_min_duration_s=1200.0).idle_opened == 2
    assert ("window_stats", T0 + 1200.0 - idle.LATE_S) in recorded.idle_reads
    assert {f.last_seen_ts for f in _open(session_factory).values()} == {T0 + 1260.0}


def test_a_pass_after_another_replicas_reads_the_whole_window_again(
    session_factory: sessionmaker[Session], recorded: _Recorded
) -> None:
    fleet = _fleet(session_factory)
    fleet.correlate(now=T0 + 1200.0)
    with unit_of_work(session_factory) as s:  # another replica's idle pass, in between
        service.set_state(s, name=flows.LAST_IDLE, value=T0 + 1230.0, now=T0 + 1230.0)
    recorded.idle_reads.clear()
    fleet.correlate(now=T0 + 1290.0)
    assert recorded.sinces() == {T0 + 1290.0 - WINDOW}


def test_a_busy_sample_that_arrives_late_still_resolves_the_finding(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    assert fleet.correlate(now=T0 + 2100.0).idle_opened == 2
    # Sampled before the pass that just ran, delivered after it (the agent was behind).
    fleet.samples("n1", _samples("n1", [0], BUSY, T0 + 2095.0, T0 + 2100.0))
    assert fleet.correlate(now=T0 + 2160.0).idle_resolved == 1
    assert sorted(_open(session_factory)) == [1]


def test_a_findings_peak_utilization_is_its_idle_spans_not_the_busy_work_before(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1"])
    fleet.job("was-busy", ["n1"], start=T0, gpus=[0])
    fleet.samples("n1", _samples("n1", [0], BUSY, T0, T0 + 600.0))
    fleet.samples("n1", _samples("n1", [0], IDLE, T0 + 600.0, T0 + 2500.0))
    assert fleet.correlate(now=T0 + 2500.0).idle_opened == 1  # the window reads busy samples
    (f,) = _open(session_factory).values()
    assert f.idle_since_ts == T0 + 590.0  # the last busy sample
    assert f.max_util == 0.0


def test_a_held_gpu_that_never_reported_is_not_read_cold_every_pass(
    session_factory: sessionmaker[Session], recorded: _Recorded
) -> None:
    fleet = _fleet(session_factory)
    fleet.job("silent-job", ["n2"], start=T0, gpus=[5])  # no agent sample from GPU 5, ever
    fleet.correlate(now=T0 + 1200.0)
    recorded.idle_reads.clear()
    fleet.correlate(now=T0 + 1260.0)
    assert recorded.sinces() == {T0 + 1200.0 - idle.LATE_S}
