"""One failing memory module is one incident (correlator/edac.py): a CE storm and the machine
check or EDAC uncorrected error of the same node (and, where the line names one, the same
module) within a day are one incident, whichever came first, with the machine check as its root
and the storm's day of CE lines as supporting evidence; later passes never duplicate either.

Lines follow the kernel's own formats, made-up values: drivers/edac/edac_mc.c edac_ce_error and
edac_ue_error ("%d CE|UE %s%son %s (%s page:0x%lx offset:0x%lx grain:%ld...)"), and
arch/x86/kernel/cpu/mce/core.c __print_mce (HW_ERR "CPU %d: Machine Check%s: %Lx Bank %d:
%016Lx") and mce_notify_irq (HW_ERR "Machine check events logged"), under pr_fmt "mce: "."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collector.parse.kernel import parse_kernel_line
from correlator.models import Incident, IncidentState
from tests.correlator.correlator_fleet import Fleet, all_incidents
from timeline import tables as t
from timeline.models import Event

NODE = "gpu-node-03"
T0 = 1_750_000_000.0
DIMM_A = (
    "EDAC MC0: {n} CE memory read error on CPU_SrcID#0_MC#0_Chan#0_DIMM#0 (channel:0 slot:0 "
    "page:0x2c41 offset:0x0 grain:32 syndrome:0x0)"
)
UE_A = (
    "EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#0_DIMM#0 (channel:0 slot:0 "
    "page:0x2c41 offset:0x0 grain:32)"
)
UE_B = (
    "EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#3_DIMM#1 (channel:3 slot:1 "
    "page:0x77e0 offset:0x0 grain:32)"
)
MCE = "mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 7: be00000000800090"
MCE_NOTICE = "mce: [Hardware Error]: Machine check events logged"
STORM = [T0 + 600 * i for i in range(4)]  # 4 + 2 + 3 + 1 = 10 errors: the trigger
CHECK_TITLE = "the host reported a hardware (machine check / memory) error"
STORM_TITLE = "one memory module of the host keeps reporting corrected ECC errors"


def _line(text: str, ts: float) -> Event:
    """A kernel line as the agent's kernel parser emits it, stamped by the agent."""
    ev = parse_kernel_line(text, node=NODE, ts=ts)
    assert ev is not None
    return ev


def _storm(fleet: Fleet, dimm: str = DIMM_A, times: list[float] = STORM) -> None:
    counts = (4, 2, 3, 1)
    fleet.events(*[_line(dimm.format(n=n), ts) for ts, n in zip(times, counts, strict=True)])


def _fleet(session_factory: sessionmaker[Session]) -> Fleet:
    fleet = Fleet(session_factory)
    fleet.nodes([NODE])
    return fleet


def _open(session_factory: sessionmaker[Session]) -> list[Incident]:
    return [i for i in all_incidents(session_factory) if i.state is IncidentState.OPEN]


def _ids_at(session_factory: sessionmaker[Session], *times: float) -> list[int]:
    """The stored ids of the events at these times, in that order."""
    with session_factory() as s:
        rows = s.execute(select(t.events.c.ts, t.events.c.id)).all()
    by_ts = {ts: i for ts, i in rows}
    return [by_ts[ts] for ts in times]


def _assert_check_holds_storm(
    inc: Incident, session_factory: sessionmaker[Session], check_ts: float, errors: int = 10
) -> None:
    """The incident's root is the machine check; the storm's CE lines support it."""
    [check_id] = _ids_at(session_factory, check_ts)
    assert inc.title == CHECK_TITLE and inc.root_cause_event_id == check_id
    assert (inc.category, inc.blame, inc.culprit_node) == ("node", "node", NODE)
    assert sorted(inc.evidence_event_ids) == sorted([check_id, *_ids_at(session_factory, *STORM)])
    assert inc.details["ce_storms"]["MC0 CPU_SrcID#0_MC#0_Chan#0_DIMM#0"]["count"] == errors
    assert f"EDAC corrected memory errors: {errors} on MC0" in inc.explanation


def test_an_uncorrected_error_after_a_storm_becomes_its_one_incident_and_root(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    _storm(fleet)
    fleet.correlate(now=STORM[-1] + 60)
    [storm] = _open(session_factory)
    assert storm.title.startswith(STORM_TITLE)
    ue_ts = STORM[-1] + 600
    fleet.events(_line(UE_A, ue_ts))
    fleet.correlate(now=ue_ts + 60)
    [inc] = _open(session_factory)
    _assert_check_holds_storm(inc, session_factory, ue_ts)
    assert inc.opened_ts == STORM[0]  # the failure began with the storm
    [gone] = [i for i in all_incidents(session_factory) if i.id == storm.id]
    assert gone.state is IncidentState.RESOLVED and gone.resolution.startswith("superseded")


def test_a_storm_after_an_uncorrected_error_joins_its_incident_instead_of_opening_one(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    ue_ts = STORM[0] - 300
    fleet.events(_line(UE_A, ue_ts))
    fleet.correlate(now=ue_ts + 60)
    _storm(fleet)
    fleet.correlate(now=STORM[-1] + 60)
    [inc] = all_incidents(session_factory)
    _assert_check_holds_storm(inc, session_factory, ue_ts)
    assert inc.details["memory_module"] == "MC0 CPU_SrcID#0_MC#0_Chan#0_DIMM#0"


def test_a_storm_and_an_uncorrected_error_in_one_pass_are_one_incident(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    _storm(fleet)
    ue_ts = STORM[-1] + 60
    fleet.events(_line(UE_A, ue_ts))
    fleet.correlate(now=ue_ts + 60)
    [inc] = all_incidents(session_factory)
    _assert_check_holds_storm(inc, session_factory, ue_ts)


def test_a_machine_check_that_names_no_module_holds_the_storm_on_its_node(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    _storm(fleet)
    fleet.correlate(now=STORM[-1] + 60)
    mce_ts = STORM[-1] + 900
    fleet.events(_line(MCE, mce_ts))
    fleet.correlate(now=mce_ts + 60)
    [inc] = _open(session_factory)
    _assert_check_holds_storm(inc, session_factory, mce_ts)


def test_an_uncorrected_error_on_another_module_leaves_the_storm_its_own_incident(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    _storm(fleet, DIMM_A)
    ue_ts = STORM[-1] + 60
    fleet.events(_line(UE_B, ue_ts))
    fleet.correlate(now=ue_ts + 60)
    [storm, check] = sorted(_open(session_factory), key=lambda i: i.title == CHECK_TITLE)
    assert storm.title.startswith(STORM_TITLE) and check.title == CHECK_TITLE
    assert storm.evidence_event_ids == _ids_at(session_factory, *STORM)
    assert check.evidence_event_ids == _ids_at(session_factory, ue_ts)
    assert check.details["memory_module"] == "MC0 CPU_SrcID#0_MC#0_Chan#3_DIMM#1"


def test_a_storm_more_than_a_day_before_the_machine_check_stays_apart(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    _storm(fleet)
    fleet.correlate(now=STORM[-1] + 60)
    ue_ts = STORM[-1] + 25 * 3600
    fleet.events(_line(UE_A, ue_ts))
    fleet.correlate(now=ue_ts + 60)
    [check] = _open(session_factory)
    assert check.title == CHECK_TITLE
    assert check.evidence_event_ids == _ids_at(session_factory, ue_ts)
    assert "ce_storms" not in check.details
    assert len(all_incidents(session_factory)) == 2  # the storm's own, resolved as it went quiet


def test_the_storm_is_the_root_over_a_bare_machine_check_notice(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    notice_ts = STORM[0] - 60
    fleet.events(_line(MCE_NOTICE, notice_ts))
    fleet.correlate(now=notice_ts + 30)
    _storm(fleet)
    fleet.correlate(now=STORM[-1] + 60)
    [inc] = _open(session_factory)
    assert inc.title.startswith(STORM_TITLE)  # the notice says less than ten errors in a day
    assert inc.root_cause_event_id == _ids_at(session_factory, STORM[-1])[0]
    assert sorted(inc.evidence_event_ids) == sorted(_ids_at(session_factory, notice_ts, *STORM))


def test_later_passes_keep_the_one_merged_incident_without_duplicating_evidence(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    _storm(fleet)
    fleet.correlate(now=STORM[-1] + 60)
    ue_ts = STORM[-1] + 600
    fleet.events(_line(UE_A, ue_ts))
    fleet.correlate(now=ue_ts + 60)
    fleet.correlate(now=ue_ts + 120)  # a pass with nothing new changes nothing
    [inc] = _open(session_factory)
    _assert_check_holds_storm(inc, session_factory, ue_ts)
    more_ts = ue_ts + 300
    fleet.events(_line(DIMM_A.format(n=1), more_ts), _line(UE_A, more_ts + 30))
    fleet.correlate(now=more_ts + 90)
    [again] = _open(session_factory)
    assert again.id == inc.id and len(all_incidents(session_factory)) == 2  # no new storm incident
    ids = again.evidence_event_ids
    assert len(ids) == len(set(ids)) == 7  # two UE lines, the day's five CE lines
    assert again.details["ce_storms"]["MC0 CPU_SrcID#0_MC#0_Chan#0_DIMM#0"]["count"] == 11
    assert again.root_cause_event_id == _ids_at(session_factory, ue_ts)[0]
