"""Live incidents for a memory module that keeps correcting errors (correlator/edac.py): the
agent's EDAC CE events, each no verdict alone, summed per node and module over the store's last
24 hours; at mcelog's per-DIMM trigger (10) one node incident, as `explain` concludes.

Lines follow torvalds/linux drivers/edac/edac_mc.c's edac_ce_error format, made-up values."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collector.parse.kernel import parse_kernel_line
from correlator import service as incidents
from correlator.models import Incident
from tests.correlator.correlator_fleet import Fleet
from timeline import tables as t
from timeline.models import Event
from timeline.settings import Settings

NODE = "gpu-node-03"
T0 = 1_750_000_000.0
DIMM_A = (
    "EDAC MC0: {n} CE memory read error on CPU_SrcID#0_MC#0_Chan#0_DIMM#0 (channel:0 slot:0 "
    "page:0x2c41 offset:0x0 grain:32 syndrome:0x0)"
)
DIMM_B = (
    "EDAC MC0: {n} CE memory read error on CPU_SrcID#0_MC#0_Chan#3_DIMM#1 (channel:3 slot:1 "
    "page:0x77e0 offset:0x0 grain:32 syndrome:0x0)"
)


def _ce(line: str, n: int, ts: float, node: str = NODE) -> Event:
    """A CE line as the agent's kernel parser emits it, stamped by the agent."""
    ev = parse_kernel_line(line.format(n=n), node=node, ts=ts)
    assert ev is not None
    return ev


def _fleet(session_factory: sessionmaker[Session]) -> Fleet:
    fleet = Fleet(session_factory)
    fleet.nodes([NODE, "gpu-node-04"])
    return fleet


def _filed(session_factory: sessionmaker[Session]) -> list[Incident]:
    with session_factory() as s:
        return incidents.list_incidents(s)


def _ids_at(session_factory: sessionmaker[Session], *times: float) -> list[int]:
    """The stored ids of the events at these times, in that order."""
    with session_factory() as s:
        rows = s.execute(select(t.events.c.ts, t.events.c.id)).all()
    by_ts = {ts: i for ts, i in rows}
    return [by_ts[ts] for ts in times]


def test_ten_corrected_errors_of_one_module_in_a_day_open_one_node_incident(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(*[_ce(DIMM_A, n, T0 + 600 * i) for i, n in enumerate((4, 2, 3, 1))])
    report = fleet.correlate(now=T0 + 3600)
    assert len(report.incident_event_received_ts) == 4  # their ingest latency is measured
    filed = _filed(session_factory)
    assert [(i.category, i.blame, i.culprit_node) for i in filed] == [("node", "node", NODE)]
    assert filed[0].count == 10 and len(filed[0].evidence_event_ids) == 4
    assert filed[0].culprit_gpu_uuid is None and filed[0].culprit_pci_bus_id is None
    assert "CPU_SrcID#0_MC#0_Chan#0_DIMM#0" in filed[0].details["memory_module"]


def test_nine_corrected_errors_in_a_day_open_nothing(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(*[_ce(DIMM_A, n, T0 + 600 * i) for i, n in enumerate((4, 2, 3))])
    fleet.correlate(now=T0 + 3600)
    assert _filed(session_factory) == []


def test_two_modules_with_six_each_open_nothing(session_factory: sessionmaker[Session]) -> None:
    fleet = _fleet(session_factory)
    fleet.events(_ce(DIMM_A, 6, T0), _ce(DIMM_B, 6, T0 + 60))
    fleet.correlate(now=T0 + 3600)
    assert _filed(session_factory) == []


def test_two_nodes_with_six_each_on_the_same_module_open_nothing(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(_ce(DIMM_A, 6, T0), _ce(DIMM_A, 6, T0 + 60, node="gpu-node-04"))
    fleet.correlate(now=T0 + 3600)
    assert _filed(session_factory) == []


def test_errors_spread_over_more_than_a_day_open_nothing(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(_ce(DIMM_A, 6, T0))
    fleet.correlate(now=T0 + 60)
    fleet.events(_ce(DIMM_A, 6, T0 + 86_400 + 60))
    fleet.correlate(now=T0 + 86_400 + 120)
    assert _filed(session_factory) == []


def test_errors_of_earlier_passes_count_toward_the_trigger(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(_ce(DIMM_A, 6, T0))
    fleet.correlate(now=T0 + 60)
    assert _filed(session_factory) == []
    fleet.events(_ce(DIMM_A, 4, T0 + 7200))
    fleet.correlate(now=T0 + 7260)
    filed = _filed(session_factory)
    assert [(i.category, i.blame, i.count) for i in filed] == [("node", "node", 10)]


def test_later_passes_update_the_one_open_incident_instead_of_duplicating_it(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(*[_ce(DIMM_A, 5, T0 + 60 * i) for i in range(2)])
    fleet.correlate(now=T0 + 600)
    fleet.correlate(now=T0 + 1200)
    fleet.events(_ce(DIMM_A, 3, T0 + 1800))
    fleet.correlate(now=T0 + 2400)
    filed = _filed(session_factory)
    assert len(filed) == 1 and filed[0].count == 13 and len(filed[0].evidence_event_ids) == 3


def test_the_evidence_is_the_day_that_reached_the_trigger_not_the_day_before_the_pass(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    day = [T0 + 600 * i for i in range(4)]
    late = T0 + 25 * 3600  # one more error a day and more after the first: not that day's
    fleet.events(*[_ce(DIMM_A, n, ts) for ts, n in zip(day, (4, 2, 3, 1), strict=True)])
    fleet.events(_ce(DIMM_A, 1, late))
    report = fleet.correlate(now=late + 60)
    [filed] = _filed(session_factory)
    assert filed.count == 10
    assert filed.evidence_event_ids == _ids_at(session_factory, *day)
    assert filed.root_cause_event_id == _ids_at(session_factory, day[-1])[0]
    assert "EDAC corrected memory errors: 10 on MC0" in filed.explanation
    assert len(report.incident_event_received_ts) == 4


def test_a_later_busier_day_replaces_the_evidence_of_the_earlier_one(
    session_factory: sessionmaker[Session],
) -> None:
    # A dedup window of two days keeps the one incident open across both days.
    settings = Settings(database_url="sqlite://", correlator_dedup_window_s=2 * 86_400)
    fleet = Fleet(session_factory, settings)
    fleet.nodes([NODE])
    first = [T0 + 600 * i for i in range(4)]
    fleet.events(*[_ce(DIMM_A, n, ts) for ts, n in zip(first, (4, 2, 3, 1), strict=True)])
    fleet.correlate(now=first[-1] + 60)
    second = [T0 + 30 * 3600 + 600 * i for i in range(3)]
    fleet.events(*[_ce(DIMM_A, 5, ts) for ts in second])
    fleet.correlate(now=second[-1] + 60)
    [filed] = _filed(session_factory)
    assert filed.count == 15
    assert filed.evidence_event_ids == _ids_at(session_factory, *second)
    assert "EDAC corrected memory errors: 15 on MC0" in filed.explanation
