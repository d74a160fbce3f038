"""A correlator pass reads telemetry before it writes anything: on SQLite a write lock is the
whole database, and a pass that held it through a long read starved ingest and the leader
lease (bench scale at 100k GPUs: the lease lapsed and leadership flapped between workers)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from correlator import service
from tests.correlator.correlator_fleet import gpu_uuid
from tests.correlator.test_idle_findings import T0, _fleet
from timeline import samples


class _Probing:
    """The real sample store; at each read, another connection tries to take the write lock."""

    def __init__(self, real: samples.SampleStore, path: str) -> None:
        self.real, self.path, self.reads = real, path, 0
        self.locked: list[str] = []

    def _probe(self, name: str) -> None:
        self.reads += 1
        other = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            self.locked.append(f"{name}: {exc}")
        finally:
            other.close()

    def window_stats(self, session: Session, **kw: Any) -> Any:
        self._probe("window_stats")
        return self.real.window_stats(session, **kw)

    def newest(self, session: Session, **kw: Any) -> Any:
        self._probe("newest")
        return self.real.newest(session, **kw)

    def newest_within(self, session: Session, **kw: Any) -> Any:
        self._probe("newest_within")
        return self.real.newest_within(session, **kw)

    def field_range(self, session: Session, **kw: Any) -> Any:
        self._probe("field_range")
        return self.real.field_range(session, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.fixture
def probing(sqlite_factory: sessionmaker[Session]) -> Iterator[_Probing]:
    spy = _Probing(samples.store(), str(sqlite_factory.kw["bind"].url.database))
    old = samples.use(spy)
    yield spy
    samples.use(old)


def test_a_pass_that_writes_findings_and_profiles_reads_all_telemetry_before_locking(
    sqlite_factory: sessionmaker[Session], probing: _Probing
) -> None:
    fleet = _fleet(sqlite_factory)
    report = fleet.correlate(now=T0 + 2100.0)  # first pass: profiles learn, findings open
    assert report.idle_opened == 2
    held = [gpu_uuid(n, i) for n in ("n1", "n2") for i in (0, 1)]
    with sqlite_factory() as s:
        assert len(service.power_profiles(s, gpu_uuids=held)) == 4  # the pass wrote these
    assert probing.reads >= 3  # the hang check's newest and windows, the idle check's window
    assert probing.locked == []
