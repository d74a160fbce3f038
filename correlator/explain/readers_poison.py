"""One uncorrected memory error as the firmware and the kernel's memory-failure handler report
it: the lines of both, linked by the page they name, read as one fault of the host's memory.

An uncorrected memory error the firmware reports (drivers/acpi/apei/ghes.c ghes_handle_memory_
failure, torvalds/linux @0237d7f355) hands the record's physical address to memory_failure_queue
as a page frame number, `physical_address >> PAGE_SHIFT` (PAGE_SHIFT 12: x86-64's and arm64's
4 KiB pages). mm/memory-failure.c (@003fa195911d) then prints, for that pfn, action_result's
"Memory failure: %#lx: recovery action for %s: %s" and, for each process that had the page
mapped, kill_proc's "Memory failure: %#lx: Sending SIGBUS to %s:%d due to hardware memory
corruption" (collector/parse/kernel_node.py reads them). A record (collector/parse/kernel_ghes.py)
and memory-failure lines of the same host naming its page are one fault; `memory_faults` makes
one event of them for the `kernel_memory_failure_at_record` rule
(correlator/rules/emitters/linux_kernel.json). A process the text shows dying of SIGBUS whose pid
is the one kill_proc names died of that fault, not of its own code or a small /dev/shm:
`sigbus_of_poison` reads it so.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from collector.parse.kernel_edac import MACHINE_CHECK, MEMORY_FAILURE
from correlator.explain.readers_gpu import _event
from timeline.models import Event, EventKind

if TYPE_CHECKING:
    from correlator.explain.reasoning import Finding

PAGE_SHIFT = 12  # x86-64 and arm64 4 KiB pages (arch/*/include/asm/page*.h)
SIGBUS = 7
# the pid a launcher's SIGBUS report names: torch's DataLoader "DataLoader worker (pid %d) is
# killed by signal: Bus error" (torch/csrc/DataLoader.cpp), torch elastic "Signal %d (SIGBUS)
# received by PID %d" (collector/parse/joblog_more.py reads both)
_PID = re.compile(r"\(pid (?P<a>\d{1,10})\)|\breceived by PID (?P<b>\d{1,10})\b")


def _host(ev: Event) -> str:
    return (ev.node or "").lower()


def _beside(a: Event, b: Event) -> bool:
    """The same host, or a host the text does not show for one of them."""
    return not a.node or not b.node or _host(a) == _host(b)


def _pfn(ev: Event) -> int | None:
    pfn = ev.payload.get("pfn")
    return int(pfn, 16) if isinstance(pfn, str) and pfn.startswith("0x") else None


def _record_pfn(ev: Event) -> int | None:
    """The page of an uncorrected GHES record's physical address, or None."""
    pa = ev.payload.get("physical_address")
    if ev.payload.get("fault") != MACHINE_CHECK or not isinstance(pa, str):
        return None
    return int(pa, 16) >> PAGE_SHIFT


def _address_line(record: Event) -> str:
    """The record's "physical_address:" line as pasted (its first line where it has none)."""
    lines = (record.raw or record.message).split("\n")
    return next((ln for ln in lines if "physical_address:" in ln), lines[0])


def _linked_message(record: Event, failures: list[Event]) -> str:
    pfn = _pfn(failures[0]) or 0
    where = f" on {record.payload['module']}" if record.payload.get("module") else ""
    said = []
    for ev in failures:
        if ev.payload.get("result"):
            said.append(
                f"recovery action for {ev.payload.get('page_type')}: {ev.payload['result']}"
            )
        elif ev.payload.get("killed_task"):
            said.append(f"{ev.payload.get('killed_by')} to {ev.payload['killed_task']}")
    return (
        f"Memory failure at the firmware's record: page {pfn:#x} of the uncorrected memory error "
        f"at physical address {record.payload['physical_address']}{where} (APEI GHES): "
        + "; ".join(said)
    )


def memory_faults(events: list[Event]) -> list[Event]:
    """One event per uncorrected GHES record whose page the text's memory-failure lines of the
    same host name: the record's address line and those lines, one fault."""
    out = []
    failures = [ev for ev in events if ev.payload.get("fault") == MEMORY_FAILURE and _pfn(ev)]
    for record in events:
        page = _record_pfn(record)
        if page is None:
            continue
        linked = [ev for ev in failures if _pfn(ev) == page and _beside(ev, record)]
        if not linked:
            continue
        raw = "\n".join([_address_line(record), *((ev.raw or ev.message) for ev in linked)])
        fault = _event(EventKind.OTHER, raw, _linked_message(record, linked))
        fault.node = record.node or next((ev.node for ev in linked if ev.node), None)
        out.append(fault)
    return out


def _sigbus_pid(f: Finding) -> int | None:
    """The pid of a process the finding reads as ended by SIGBUS, when its line names one."""
    if SIGBUS not in (f.verdict.signal, f.event.payload.get("signal")):
        return None
    m = _PID.search(f.event.raw or f.event.message)
    return int(m["a"] or m["b"]) if m else None


def sigbus_of_poison(found: list[Finding]) -> list[Finding]:
    """Each process death by SIGBUS whose pid the kernel signalled for a poisoned page (kill_proc,
    same host) read as that memory fault: the node's, not the program's; others as they are."""
    kills = [f for f in found if isinstance(f.event.payload.get("killed_pid"), int)]
    if not kills:
        return found
    out = []
    for f in found:
        pid = _sigbus_pid(f)
        kill = next(
            (
                k
                for k in kills
                if k.event.payload["killed_pid"] == pid and _beside(k.event, f.event)
            ),
            None,
        )
        out.append(f if kill is None else replace(f, verdict=kill.verdict))
    return out
