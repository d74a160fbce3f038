"""Firmware-first (APEI/GHES) hardware error records through the live correlator: the agent
reads one record's lines as one event (collector/parse/kernel_ghes.py); an uncorrected
(recoverable or fatal) record files the node's hardware incident as a machine check does, a
corrected one alone files nothing, corrected memory records naming one DIMM add up to mcelog's
per-DIMM trigger as EDAC CE lines do, and a poisoned page's "Memory failure" line is the node's
memory fault, held in one incident with that DIMM's storm (correlator/edac.py).

Lines follow the kernel's own formats, made-up values: drivers/acpi/apei/ghes.c
__ghes_print_estatus ("{%u}" HW_ERR "Hardware error from APEI Generic Hardware Error Source:
%d"), drivers/firmware/efi/cper.c cper_estatus_print / cper_print_mem / cper_mem_err_location /
cper_dimm_err_location, mm/memory-failure.c action_result."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collector.parse.kernel import parse_kernel_text
from correlator.models import IncidentState
from tests.correlator.correlator_fleet import Fleet, all_incidents
from timeline import tables as t
from timeline.models import Event

NODE = "gpu-node-05"
BOOT = 1_750_000_000.0
CHECK_TITLE = "the host reported a hardware (machine check / memory) error"
STORM_TITLE = "one memory module of the host keeps reporting corrected ECC errors"
DIMM = "APEI NODE 0 CPU0_DIMM_A1"


def _record(n: int, severity: str, *, dimm: bool = True, error_type: str = "2, single-bit ECC"):
    """The lines of one GHES memory error record, numbered n."""
    lines = [
        "Hardware error from APEI Generic Hardware Error Source: 1",
        *(
            ["It has been corrected by h/w and requires no further action"]
            if severity == "corrected"
            else []
        ),
        f"event severity: {severity}",
        f" Error 0, type: {severity}",
        "  section_type: memory error",
        "  physical_address: 0x0000004f1a2b3000",
        "  node:0 card:0 module:0 rank:1 bank:2 row:5238 column:856 ",
        f"  error_type: {error_type}",
    ]
    if dimm:
        lines.append("  DIMM location: NODE 0 CPU0_DIMM_A1 ")
    return [f"{{{n}}}[Hardware Error]: {body}" for body in lines]


def _events(uptime: float, lines: list[str]) -> list[Event]:
    """Kernel lines at one uptime as the agent's kernel parser emits them for this node."""
    text = "\n".join(f"[{uptime:12.6f}] {line}" for line in lines)
    return parse_kernel_text(text, node=NODE, boot_ts=BOOT)


def _fleet(session_factory: sessionmaker[Session]) -> Fleet:
    fleet = Fleet(session_factory)
    fleet.nodes([NODE])
    return fleet


def _stored(session_factory: sessionmaker[Session]) -> list[int]:
    with session_factory() as s:
        return [r.id for r in s.execute(select(t.events.c.id).order_by(t.events.c.ts))]


def test_an_uncorrected_ghes_record_is_one_event_and_the_nodes_machine_check_incident(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(*_events(100.0, _record(1, "recoverable", error_type="3, multi-bit ECC")))
    fleet.correlate(now=BOOT + 160)
    [record_id] = _stored(session_factory)  # nine lines, one event
    [inc] = all_incidents(session_factory)
    assert inc.title == CHECK_TITLE and inc.root_cause_event_id == record_id
    assert (inc.category, inc.blame, inc.culprit_node) == ("node", "node", NODE)
    assert inc.evidence_event_ids == [record_id]
    assert inc.details["machine_check_modules"] == [DIMM]


def test_a_corrected_ghes_record_alone_opens_no_incident(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(*_events(100.0, _record(1, "corrected")))
    fleet.events(*_events(200.0, _record(2, "corrected", dimm=False)[:4]))  # names no DIMM
    fleet.events(*_events(300.0, ["{3}[Hardware Error]: event severity: corrected"]))
    fleet.correlate(now=BOOT + 360)
    assert len(_stored(session_factory)) == 3
    assert all_incidents(session_factory) == []


def test_corrected_ghes_records_of_one_dimm_reach_the_trigger_as_a_storm(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    for i in range(10):
        fleet.events(*_events(100.0 + 600 * i, _record(i + 1, "corrected")))
    fleet.correlate(now=BOOT + 100 + 600 * 9 + 60)
    [inc] = all_incidents(session_factory)
    assert inc.title.startswith(STORM_TITLE) and inc.state is IncidentState.OPEN
    assert inc.details["ce_storms"][DIMM]["count"] == 10
    assert sorted(inc.evidence_event_ids) == _stored(session_factory)


def test_nine_corrected_ghes_records_stay_under_the_trigger(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    for i in range(9):
        fleet.events(*_events(100.0 + 600 * i, _record(i + 1, "corrected")))
    fleet.correlate(now=BOOT + 100 + 600 * 8 + 60)
    assert all_incidents(session_factory) == []


def test_a_poisoned_page_after_a_ghes_storm_is_one_incident_with_the_failure_as_root(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    for i in range(10):
        fleet.events(*_events(100.0 + 600 * i, _record(i + 1, "corrected")))
    fleet.correlate(now=BOOT + 6000)
    [storm] = all_incidents(session_factory)
    failure = "Memory failure: 0x4f1a2b3: recovery action for dirty LRU page: Recovered"
    [ev] = _events(6500.0, [failure])
    assert ev.payload["fault"] == "memory_failure" and ev.payload["pfn"] == "0x4f1a2b3"
    fleet.events(ev)
    fleet.correlate(now=BOOT + 6560)
    [inc] = [i for i in all_incidents(session_factory) if i.state is IncidentState.OPEN]
    failure_id = _stored(session_factory)[-1]
    assert inc.title == CHECK_TITLE and inc.root_cause_event_id == failure_id
    assert inc.details["ce_storms"][DIMM]["count"] == 10
    assert sorted(inc.evidence_event_ids) == _stored(session_factory)
    [gone] = [i for i in all_incidents(session_factory) if i.id == storm.id]
    assert gone.state is IncidentState.RESOLVED and (gone.resolution or "").startswith("superseded")


def test_a_sigbus_the_kernel_sent_for_a_poisoned_page_opens_the_nodes_memory_incident(
    session_factory: sessionmaker[Session],
) -> None:
    # mm/memory-failure.c kill_proc: the process's SIGBUS is the host's memory fault, as explain
    # reads it (linux_kernel.json kernel_memory_failure_kill)
    fleet = _fleet(session_factory)
    kill = (
        "Memory failure: 0x4f1a2b3: Sending SIGBUS to python:4242 due to hardware memory corruption"
    )
    [ev] = _events(100.0, [kill])
    assert ev.payload["fault"] == "memory_failure" and ev.payload["killed_pid"] == 4242
    fleet.events(ev)
    fleet.correlate(now=BOOT + 160)
    [inc] = all_incidents(session_factory)
    assert (inc.category, inc.blame, inc.culprit_node) == ("node", "node", NODE)
