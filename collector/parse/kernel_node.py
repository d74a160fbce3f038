"""Recognizers for kernel messages about the host itself: lockups, hung tasks, panics, machine
checks, memory (EDAC) errors, block-device and filesystem I/O errors, NFS servers gone, and the
IOMMU blocking a device's DMA.

Each is a `Match` of kind OTHER carrying the message; what it means is the correlator's rule
(correlator/rules/emitters/linux_kernel.json). Formats are the kernel's own printk strings.
"""

from __future__ import annotations

import re
from typing import Any

from collector.parse.kernel_edac import EDAC_UE, MACHINE_CHECK, MEMORY_FAILURE, ue_fields
from collector.parse.kernel_rules import Match
from timeline.models import EventKind, Severity

# mm/memory-failure.c action_result (torvalds/linux): "%#lx: recovery action for %s: %s" under
# pr_fmt "Memory failure: " (v4.x on); before it "MCE %#lx: %s page recovery: %s" (2.6.32 to
# 4.x, "dirty " in front of the page type at first): one page the hardware poisoned
_MEMORY_FAILURE = re.compile(
    r"(?:Memory failure: (?P<pfn>0x[0-9a-f]{1,16}): recovery action for (?P<page>[^:]{1,60})|"
    r"\bMCE (?P<old_pfn>0x[0-9a-f]{1,16}): (?P<old_page>[^:]{1,60}) page recovery): "
    r"(?P<result>Ignored|Failed|Delayed|Recovered)\b"
)
# The process the kernel signals for a poisoned page it had mapped: mm/memory-failure.c kill_proc
# (torvalds/linux @003fa195911d) "Memory failure: %#lx: Sending SIGBUS to %s:%d due to hardware
# memory corruption" (v4.x: "... Killing %s:%d due to ..."; 2.6.32 to 4.x kill_proc_ao "MCE %#lx:
# Killing %s:%d early due to ..."), kill_procs "%#lx: forcibly killing %s:%d because of failure
# to unmap corrupted page" (SIGKILL); drivers/acpi/apei/ghes.c memory_failure_cb "%#llx: Sending
# SIGBUS to %s:%d due to hardware memory corruption"; arch/x86/mm/fault.c do_sigbus (and arm64's)
# "MCE: Killing %s:%d due to hardware memory corruption fault at %lx" (no page number)
_MEMORY_KILL = re.compile(
    r"(?:(?P<pfn>0x[0-9a-f]{1,16}): (?:Sending SIGBUS to|Killing|forcibly killing)|"
    r"\bMCE: Killing) (?P<task>[^\n]{1,64}?):(?P<pid>\d{1,10}) (?:early )?"
    r"(?:due to hardware memory corruption|because of failure to unmap corrupted page)"
)

# (slug, message shape) -- kernel/watchdog.c, kernel/watchdog_perf.c, kernel/hung_task.c,
# kernel/panic.c, arch/x86/kernel/cpu/mce/core.c, drivers/edac, block/blk-core.c,
# fs/buffer.c, fs/ext4/super.c, fs/xfs, fs/nfs/client.c, drivers/iommu/amd/iommu.c
# (amd_iommu_report_page_fault), drivers/iommu/intel/dmar.c (dmar_fault_do_one)
_NODE_FAULTS: list[tuple[str, re.Pattern[str]]] = [
    ("soft_lockup", re.compile(r"BUG: soft lockup\W")),
    ("hard_lockup", re.compile(r"Watchdog detected hard LOCKUP|NMI watchdog: .*hard LOCKUP")),
    ("hung_task", re.compile(r"INFO: task \S+ blocked for more than \d+ seconds")),
    ("panic", re.compile(r"Kernel panic - not syncing")),
    ("kernel_bug", re.compile(r"kernel BUG at \S+")),
    (
        MACHINE_CHECK,
        re.compile(
            r"mce: \[Hardware Error\]|Machine check events logged|"
            # __print_mce before mce/core.c's pr_fmt "mce: " (2.6.3x-4.x): HW_ERR alone
            r"(?:^|\s)\[Hardware Error\]: CPU \d+: Machine Check|"
            # kill_me_maybe / mce_notify_process: pr_err under pr_fmt "mce: "
            r"mce: Uncorrected hardware memory error in user-access at"
        ),
    ),
    # mm/memory-failure.c action_result: pr_err("%#lx: recovery action for %s: %s\n") under
    # pr_fmt "Memory failure: ", printed for each page the hardware poisoned (all four results)
    (MEMORY_FAILURE, _MEMORY_FAILURE),
    (MEMORY_FAILURE, _MEMORY_KILL),
    (EDAC_UE, re.compile(r"EDAC \S+: .{0,60}\b(?:UE|Uncorrected|uncorrectable)\b")),
    (
        "io_error",
        re.compile(
            r"(?:blk_update_request|critical medium|I/O) error, dev \w+|Buffer I/O error on dev"
        ),
    ),
    (
        "fs_error",
        re.compile(
            r"EXT4-fs error|XFS \(\S+\): .*(?:Corruption|I/O error)|Remounting filesystem read-only"
        ),
    ),
    ("nfs_down", re.compile(r"nfs: server \S+ not responding")),
    (
        "iommu_fault",
        re.compile(
            r"AMD-Vi: Event logged \[IO_PAGE_FAULT |"
            r"\bDMAR: ?\[(?:DMA (?:Read|Write)|INTR-REMAP)[^\]]{0,24}\] Request device \["
        ),
    ),
]
WORTH_A_LOOK = re.compile(
    r"lockup|LOCKUP|blocked for more than|panic|BUG|Hardware Error|Machine check|EDAC|"
    r"Memory failure|hardware memory (?:error|corruption)|page recovery|"
    r"I/O error|EXT4-fs|XFS|read-only|nfs: server|IO_PAGE_FAULT|DMAR"
)


def node_fault(msg: str) -> Match | None:
    """A kernel message reporting a fault of the host (not of a GPU)."""
    if not WORTH_A_LOOK.search(msg):
        return None
    for slug, pattern in _NODE_FAULTS:
        if pattern.search(msg):
            payload: dict[str, Any] = {"text": msg, "fault": slug}
            if slug == EDAC_UE:  # the module it names, keyed as its CE lines' (kernel_edac.py)
                payload |= ue_fields(msg) or {}
            elif slug == MEMORY_FAILURE:
                payload |= memory_failure_fields(msg)
            return Match(EventKind.OTHER, msg, None, Severity.ERROR, None, payload)
    return None


def memory_failure_fields(msg: str) -> dict[str, Any]:
    """The page (pfn), its type and the recovery's result of one memory-failure line, or the
    page and the process (task, pid) the kernel signalled for it; empty for neither."""
    if mf := _MEMORY_FAILURE.search(msg):
        page = mf["page"] or mf["old_page"]
        return {"pfn": mf["pfn"] or mf["old_pfn"], "page_type": page, "result": mf["result"]}
    if mk := _MEMORY_KILL.search(msg):
        out: dict[str, Any] = {"killed_task": mk["task"], "killed_pid": int(mk["pid"])}
        # SIGKILL when the page could not be unmapped (kill_procs), SIGBUS otherwise
        out["killed_by"] = "SIGKILL" if "forcibly" in mk.group(0) else "SIGBUS"
        return out | ({"pfn": mk["pfn"]} if mk["pfn"] else {})
    return {}
