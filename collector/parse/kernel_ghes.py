"""Firmware-first (ACPI APEI / GHES) hardware error records: the lines of one record, read as
one event. Shared by the agent's kernel parser and `explain`'s reading of a text (kernel.py).

Formats (torvalds/linux; the commit is the stored version the format was read at):
- drivers/acpi/apei/ghes.c @0237d7f355 __ghes_print_estatus: every line of one record carries
  the prefix `"%s{%u}" HW_ERR` (log level, the record's sequence number, include/linux/printk.h
  HW_ERR "[Hardware Error]: "), first "Hardware error from APEI Generic Hardware Error Source:
  %d"; ghes_severity maps CPER "recoverable" to GHES_SEV_RECOVERABLE (an uncorrected error the
  OS must handle: memory_failure_queue poisons the page) and "fatal" to GHES_SEV_PANIC.
- drivers/firmware/efi/cper.c @0a5a46a6a6 cper_estatus_print: "It has been corrected by h/w and
  requires no further action" (corrected only), "event severity: %s" (severity_strs
  recoverable, fatal, corrected, info); cper_estatus_print_section "Error %d, type: %s",
  "section_type: memory error" / "general processor error" / "IA32/X64 processor error" / "ARM
  processor error" / "PCIe error" / ...; cper_print_pcie "port_type: %d, %s", "version: %d.%d",
  "command: 0x%04x, status: 0x%04x", "device_id: %04x:%02x:%02x.%x", "slot: %d",
  "secondary_bus: 0x%02x", "vendor_id: 0x%04x, device_id: 0x%04x", "class_code: %02x%02x%02x",
  "serial number: ...", "bridge: ...", and for a fatal section its AER registers
  ("aer_uncor_status: ...", "aer_uncor_severity: ...", "TLP Header: ..."); cper_print_mem
  "error_status: ...", "physical_address:
  0x%016llx", cper_mem_err_location's "node:%d card:%d module:%d rank:%d bank:%d ... row:%d
  column:%d " (older kernels: "node: %d card: %d ...", and before cper_mem_err_location one
  "node: %d" field a line), "error_type: %d, %s" (mem_err_type_strs: "single-bit ECC",
  "multi-bit ECC", ...), cper_dimm_err_location "DIMM location: %s %s " (bank and device
  locator from SMBIOS) or "DIMM location: not present. DMI handle: 0x%.4x ".

What a record means: fatal or recoverable is an uncorrected hardware error of the host, the
firmware-first twin of a machine check (`machine_check`, as kernel_node.py labels the "mce:"
lines), unless every section that carries it is a PCIe one: that is an uncorrected PCIe error
(`pcie_error`), not a CPU or memory fault. ghes.c @0237d7f355 ghes_do_proc hands a recoverable
PCIe section that holds the device's id and AER registers to the AER driver (aer_recover_queue),
which recovers the device and prints its own AER lines naming it; a fatal record is
GHES_SEV_PANIC: the kernel panics. A corrected PCIe record stays a report, as every corrected
record naming no DIMM does. A corrected memory error is one corrected error, as one EDAC CE line
is: it counts toward mcelog's per-DIMM trigger only where the record names the DIMM (a DIMM
location, or the node/card/module triple). mcelog counts firmware-first corrected errors per
DIMM (ghes.c apei_mce_report_mem_error hands them to it as machine-check records) and rasdaemon
counts ghes_edac's per-DIMM mc_events; a record naming no DIMM cannot be charged to one, so it
stays a report. Such a module is keyed "APEI ..." so that a host also running ghes_edac (which
prints its own "EDAC MCn: 1 CE ..." line for the same error) never counts one error twice under
one key.
"""

from __future__ import annotations

import re
from typing import Any

from collector.parse.kernel_edac import FAULT as CE_FAULT
from collector.parse.kernel_edac import MACHINE_CHECK
from collector.parse.kernel_rules import Match
from timeline.models import EventKind, Severity

RECORD = re.compile(r"^\{(?P<rec>\d{1,10})\}\[Hardware Error\]: ?(?P<body>.*)$")
REPORT = "hardware_error_report"  # a corrected (or informational) record: no fault alone
PCIE = "pcie_error"  # an uncorrected record whose uncorrected sections are all PCIe ones
UNCORRECTED = frozenset({"fatal", "recoverable"})

_SOURCE = re.compile(r"Hardware error from APEI Generic Hardware Error Source: (?P<src>\d+)")
_SEVERITY = re.compile(r"^event severity: (?P<sev>\w+)")
_SECTION = re.compile(r"^Error (?P<n>\d+), type: (?P<sev>\w+)")
_TYPE = re.compile(r"^section_type: (?P<type>[\w/ ]+?) error$")
_ADDRESS = re.compile(r"^physical_address: (?P<pa>0x[0-9a-fA-F]+)$")
_MEM_TYPE = re.compile(r"^error_type: (?P<n>\d+), (?P<what>.+)$")
_DIMM = re.compile(r"^DIMM location: (?P<where>.+?)\s*$")
# cper_print_pcie's "device_id: %04x:%02x:%02x.%x" (segment, bus, device, function); its
# "vendor_id: 0x%04x, device_id: 0x%04x" line starts with vendor_id and is not this one
_PCIE_DEVICE = re.compile(r"^device_id: (?P<dev>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])$")
_FIELD = re.compile(
    r"\b(?P<k>node|card|module|rank|bank|bank_group|bank_address|device|row|column|"
    r"bit_position|chip_id): ?(?P<v>\d{1,10})(?=\s|$)"
)
_QUIET = re.compile(  # lines of a record read but not kept
    r"^(?:It has been corrected by h/w|error_status:|physical_address_mask:|fru_(?:id|text):|"
    r"(?:precise|imprecise) tstamp:|processor_|operation:|flags:|level:|version_info:|IP:|"
    r"requestor_id:|responder_id:|target_address:|error_type: 0x|[a-z ]+ error(?:,|$)|"
    # cper_print_pcie's other lines
    r"port_type:|version:|command:|slot:|secondary_bus:|vendor_id:|class_code:|serial number:|"
    r"bridge:|aer_uncor_(?:status|severity):|TLP Header:)"
)
_DIMM_KEY = ("node", "card", "module")  # what names one module (rank, bank, row: within it)


def record_of(msg: str) -> tuple[int, str] | None:
    """The record number and body of one GHES record line, or None."""
    if not msg.startswith("{") or not (m := RECORD.match(msg)):
        return None
    return int(m["rec"]), m["body"].strip()


def _module(fields: dict[str, Any]) -> str | None:
    """The memory module the record names, keyed apart from EDAC's keys, or None."""
    if where := fields.get("dimm_location"):
        return f"APEI {where}"
    if "module" in fields.get("location", {}):
        loc = fields["location"]
        return "APEI " + " ".join(f"{k}:{loc[k]}" for k in _DIMM_KEY if k in loc)
    return None


def read_record(bodies: list[str]) -> dict[str, Any]:
    """The fields of one record's lines (their bodies, without the "{N}[Hardware Error]: "
    prefix); `unread` counts lines of no known shape."""
    f: dict[str, Any] = {"sections": [], "location": {}, "unread": 0}
    for body in bodies:
        if not body:
            continue
        if m := _SOURCE.search(body):
            f["source_id"] = int(m["src"])
        elif m := _SEVERITY.match(body):
            f["ghes_severity"] = m["sev"]
        elif m := _SECTION.match(body):
            f["sections"].append({"severity": m["sev"]})
        elif m := _TYPE.match(body):
            if not f["sections"]:
                f["sections"].append({})
            f["sections"][-1]["type"] = m["type"]
        elif m := _ADDRESS.match(body):
            f["physical_address"] = m["pa"].lower()
        elif m := _MEM_TYPE.match(body):
            f["memory_error_type"] = m["what"].strip()
        elif m := _DIMM.match(body):
            f["dimm_location"] = m["where"].removeprefix("not present. ")
        elif m := _PCIE_DEVICE.match(body):
            f.setdefault("pcie_device", m["dev"])
        elif found := _FIELD.findall(body):
            f["location"].update({k: int(v) for k, v in found})
        elif not _QUIET.match(body):
            f["unread"] += 1
    return f


def _pcie_only(sections: list[dict[str, Any]]) -> bool:
    """Whether the sections that carry a record's uncorrected error (those of uncorrected or
    unstated severity) are all PCIe ones, and there is one."""
    carrying = [s for s in sections if s.get("severity", "fatal") in UNCORRECTED]
    return bool(carrying) and all(s.get("type") == "PCIe" for s in carrying)


def _message(f: dict[str, Any], sev: str, place: str | None) -> str:
    kinds = [s["type"] for s in f["sections"] if s.get("type")] or ["hardware"]
    what = f" ({f['memory_error_type']})" if f.get("memory_error_type") else ""
    where = f" on {place}" if place else ""
    src = f.get("source_id")
    tail = f" (APEI GHES source {src})" if src is not None else " (APEI GHES)"
    return f"[Hardware Error]: {sev} {', '.join(kinds)} error{what}{where}{tail}"


def ghes_record(bodies: list[str]) -> Match | None:
    """One GHES record (the bodies of its lines, in order) as one event: an uncorrected error
    is a machine check (a PCIe error when only PCIe sections carry it), a corrected memory
    error naming its DIMM one CE report of that module (kernel_edac.FAULT), anything else a
    report. None for no lines."""
    if not bodies:
        return None
    f = read_record(bodies)
    stated = (s["severity"] for s in f["sections"] if s.get("severity"))
    sev = str(f.get("ghes_severity") or next(stated, "unknown"))
    module = _module(f)
    memory = any(s.get("type") == "memory" for s in f["sections"])
    payload: dict[str, Any] = {k: v for k, v in f.items() if v not in ({}, [], None)}
    if not f["unread"]:
        del payload["unread"]
    payload |= {"text": "\n".join(bodies), "ghes_severity": sev}
    place = module
    if sev in UNCORRECTED and _pcie_only(f["sections"]):
        # not the CPU's or memory's: the device it names (read by the kernel_ghes_pcie rules)
        payload["fault"] = PCIE
        place = f.get("pcie_device")
        level = Severity.CRITICAL if sev == "fatal" else Severity.ERROR
    elif sev in UNCORRECTED:
        payload["fault"] = MACHINE_CHECK
        if module and memory:
            payload["module"] = module
        level = Severity.CRITICAL if sev == "fatal" else Severity.ERROR
    elif sev == "corrected" and memory and module:
        payload |= {"fault": CE_FAULT, "module": module, "ce_count": 1}
        level = Severity.WARNING
    else:
        payload["fault"] = REPORT
        level = Severity.INFO if sev in ("corrected", "info") else Severity.WARNING
    return Match(EventKind.OTHER, _message(f, sev, place), None, level, None, payload)
