"""Firmware-first (APEI/GHES) records of PCIe errors (collector/parse/kernel_ghes.py and the
kernel_ghes_pcie rules of correlator/rules/emitters/linux_kernel.json): an uncorrected record
whose uncorrected sections are all PCIe ones is a PCIe error of the device it names, not a
CPU/memory machine check; a corrected one stays a report.

Lines follow torvalds/linux's formats with made-up values: drivers/acpi/apei/ghes.c
__ghes_print_estatus ("{%u}" HW_ERR "Hardware error from APEI Generic Hardware Error Source:
%d"), drivers/firmware/efi/cper.c cper_estatus_print ("It has been corrected by h/w and requires
no further action", "event severity: %s"), cper_estatus_print_section (" Error %d, type: %s",
"  section_type: PCIe error") and cper_print_pcie ("port_type: %d, %s", "version: %d.%d",
"command: 0x%04x, status: 0x%04x", "device_id: %04x:%02x:%02x.%x", "slot: %d", "secondary_bus:
0x%02x", "vendor_id: 0x%04x, device_id: 0x%04x", "class_code: %02x%02x%02x", and for a fatal
section "aer_uncor_status: 0x%08x, aer_uncor_mask: 0x%08x", "aer_uncor_severity: 0x%08x", "TLP
Header: %08x %08x %08x %08x")."""

from __future__ import annotations

from collector.parse.kernel import parse_kernel_text
from collector.parse.kernel_edac import MACHINE_CHECKS
from correlator.explain.readers import read_events
from correlator.rules import classify_event
from correlator.taxonomy import Blame, Category
from timeline.models import Event, Severity

_AER_REGISTERS = [
    "aer_uncor_status: 0x00004000, aer_uncor_mask: 0x00000000",
    "aer_uncor_severity: 0x00462030",
    "TLP Header: 40000001 0000000f 9c4c0000 00000000",
]


CHECK = "the host reported a hardware (machine check / memory) error"


def _pcie(n: int, severity: str, *, sections: tuple[str, ...] = ("PCIe",)) -> list[str]:
    """One record's lines: its header, then one section of each type in `sections`."""
    bodies = ["Hardware error from APEI Generic Hardware Error Source: 0"]
    if severity == "corrected":
        bodies.append("It has been corrected by h/w and requires no further action")
    bodies.append(f"event severity: {severity}")
    for i, kind in enumerate(sections):
        bodies += [f" Error {i}, type: {severity}", f"  section_type: {kind} error"]
        if kind != "PCIe":
            continue
        bodies += [
            "  port_type: 0, PCIe end point",
            "  version: 3.0",
            "  command: 0x0546, status: 0x0010",
            "  device_id: 0000:3b:00.0",
            "  slot: 0",
            "  secondary_bus: 0x00",
            "  vendor_id: 0x10de, device_id: 0x2330",
            "  class_code: 030200",
        ]
        if severity == "fatal":
            bodies += [f"  {line}" for line in _AER_REGISTERS]
    return [f"[  412.5{i:05d}] {{{n}}}[Hardware Error]: {b}" for i, b in enumerate(bodies)]


def _one(lines: list[str]) -> Event:
    [ev] = parse_kernel_text("\n".join(lines), node="gpu-01")
    return ev


def test_a_recoverable_pcie_record_is_a_pcie_error_of_its_device_not_a_machine_check() -> None:
    ev = _one(_pcie(4, "recoverable"))
    p = ev.payload
    assert p["fault"] == "pcie_error" and p["pcie_device"] == "0000:3b:00.0"
    assert p["sections"] == [{"severity": "recoverable", "type": "PCIe"}]
    assert "unread" not in p  # every cper_print_pcie line is a known shape
    assert ev.severity is Severity.ERROR and "on 0000:3b:00.0" in ev.message
    assert p["fault"] not in MACHINE_CHECKS  # the correlator's machine-check slugs (edac.py)
    v = classify_event(ev)
    assert v is not None and (v.category, v.blame) == (Category.NODE, Blame.UNKNOWN)
    assert "machine check" not in v.summary


def test_a_fatal_pcie_record_is_a_critical_node_pcie_error_not_a_machine_check() -> None:
    ev = _one(_pcie(5, "fatal"))
    assert ev.payload["fault"] == "pcie_error" and ev.severity is Severity.CRITICAL
    assert "unread" not in ev.payload and ev.payload["fault"] not in MACHINE_CHECKS
    v = classify_event(ev)
    assert v is not None and (v.category, v.blame) == (Category.NODE, Blame.NODE)
    assert "PCIe" in v.summary and "machine check" not in v.summary


def test_a_corrected_pcie_record_stays_a_report_with_no_verdict() -> None:
    ev = _one(_pcie(6, "corrected"))
    assert ev.payload["fault"] == "hardware_error_report" and ev.severity is Severity.INFO
    assert classify_event(ev) is None


def test_a_record_with_a_memory_section_beside_the_pcie_one_stays_a_machine_check() -> None:
    for sections in (("memory", "PCIe"), ("PCIe", "general processor")):
        ev = _one(_pcie(7, "recoverable", sections=sections))
        assert ev.payload["fault"] == "machine_check"
        v = classify_event(ev)
        assert v is not None and v.summary == CHECK


def test_explain_reads_a_recoverable_pcie_record_as_one_pcie_finding() -> None:
    evs = read_events("\n".join(_pcie(8, "recoverable")))
    verdicts = [classify_event(e) for e in evs]
    assert [v.summary for v in verdicts if v is not None] == [
        "the firmware reported an uncorrected PCIe error (recoverable)"
    ]
