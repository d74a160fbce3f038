"""An uncorrected memory error as the firmware and the kernel report it, linked by its page.

Lines follow the kernel's own formats, made-up values: drivers/acpi/apei/ghes.c
__ghes_print_estatus and drivers/firmware/efi/cper.c cper_print_mem (the record, its
"physical_address: 0x%016llx"); mm/memory-failure.c action_result ("Memory failure: %#lx:
recovery action for %s: %s") and kill_proc ("Memory failure: %#lx: Sending SIGBUS to %s:%d due
to hardware memory corruption"), whose %#lx is the record's address >> PAGE_SHIFT (12); torch's
DataLoader.cpp "DataLoader worker (pid %d) is killed by signal: Bus error" and torch elastic's
"Signal %d (SIGBUS) received by PID %d".
"""

from __future__ import annotations

from collector.parse.kernel import parse_kernel_line
from correlator.explain import explain_text
from correlator.explain.readers import read_delivered
from correlator.explain.reasoning import findings
from correlator.taxonomy import Blame, Category

RECORD = [
    "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
    "{1}[Hardware Error]: event severity: recoverable",
    "{1}[Hardware Error]:  Error 0, type: recoverable",
    "{1}[Hardware Error]:   section_type: memory error",
    "{1}[Hardware Error]:   physical_address: 0x0000004f1a2b3000",
    "{1}[Hardware Error]:   node:0 card:3 module:1 rank:0 bank:2 row:1234 column:8 ",
    "{1}[Hardware Error]:   error_type: 3, multi-bit ECC",
]
KILL = (
    "Memory failure: 0x4f1a2b3: Sending SIGBUS to pt_data_worker:4242 due to hardware memory "
    "corruption"
)
RECOVERY = "Memory failure: 0x4f1a2b3: recovery action for dirty LRU page: Recovered"
DATALOADER = (
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible "
    "that dataloader's workers are out of shared memory. Please try to raise your shared memory "
    "limit."
)
LINKED = "reported by the firmware and handled by the kernel at the same page"


def _journal(host: str, lines: list[str]) -> list[str]:
    return [f"Jan 10 12:00:01 {host} kernel: {ln}" for ln in lines]


def test_a_memory_failure_at_a_ghes_records_page_is_one_fault_quoted_from_its_address() -> None:
    got = explain_text("\n".join(_journal("gpu-07", [*RECORD, KILL, RECOVERY])))
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-07")
    assert LINKED in got.explanation
    # the record's address line and the kernel's lines for that page lead the quote
    assert "physical_address: 0x0000004f1a2b3000" in got.evidence[0]
    assert KILL in got.evidence[1] and RECOVERY in got.evidence[2]


def test_a_memory_failure_at_another_page_is_not_linked_to_the_record() -> None:
    other = RECOVERY.replace("0x4f1a2b3", "0x4f1a2b4")
    got = explain_text("\n".join(_journal("gpu-07", [*RECORD, other])))
    assert (got.category, got.blame) == ("node", "node")
    assert LINKED not in got.explanation


def test_a_record_and_a_memory_failure_of_two_hosts_are_not_one_fault() -> None:
    text = "\n".join([*_journal("gpu-07", RECORD), *_journal("gpu-08", [RECOVERY])])
    events = read_delivered(text)[0]
    assert not any(LINKED in f.verdict.summary for f in findings(events))


def test_a_sigbus_sent_due_to_hardware_memory_corruption_alone_is_the_nodes_memory_fault() -> None:
    got = explain_text(KILL)
    assert (got.category, got.blame) == ("node", "node")


def test_a_dataloader_sigbus_whose_pid_the_kernel_signalled_is_the_nodes_memory_fault() -> None:
    got = explain_text("\n".join([*_journal("gpu-07", [KILL]), "Traceback:", DATALOADER]))
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-07")
    # the worker's death supports the memory fault: no "other sign" of a small /dev/shm
    assert "shared memory" not in got.explanation
    assert any("DataLoader worker (pid 4242)" in ln for ln in got.evidence)


def test_an_elastic_sigbus_whose_pid_the_kernel_signalled_supports_the_memory_fault() -> None:
    elastic = "torch.distributed.elastic: Signal 7 (SIGBUS) received by PID 4242"
    events = read_delivered("\n".join([*_journal("gpu-07", [KILL]), elastic]))[0]
    [sigbus] = [f for f in findings(events) if "received by PID" in (f.event.raw or "")]
    assert (sigbus.verdict.category, sigbus.verdict.blame) == (Category.NODE, Blame.NODE)


def test_a_dataloader_sigbus_of_another_pid_keeps_the_shm_reading() -> None:
    events = read_delivered("\n".join([KILL, DATALOADER.replace("4242", "4243")]))[0]
    [worker] = [f for f in findings(events) if "DataLoader" in (f.event.raw or "")]
    assert (worker.verdict.category, worker.verdict.blame) == (Category.OOM_HOST, Blame.JOB)


def test_a_plain_dataloader_sigbus_without_a_memory_failure_line_stays_the_users() -> None:
    got = explain_text(DATALOADER)
    assert (got.category, got.blame) == ("oom_host", "job")


def test_the_kernels_memory_failure_lines_of_every_era_name_their_page_and_process() -> None:
    cases: dict[str, dict[str, object]] = {
        KILL: {"pfn": "0x4f1a2b3", "killed_task": "pt_data_worker", "killed_pid": 4242},
        "MCE 0xb4365: Killing copy_to_user_te:3768 early due to hardware memory corruption": {
            "pfn": "0xb4365", "killed_task": "copy_to_user_te", "killed_by": "SIGBUS"},
        "Memory failure: 0x8a398a: forcibly killing python:77 because of failure to unmap "
        "corrupted page": {"pfn": "0x8a398a", "killed_pid": 77, "killed_by": "SIGKILL"},
        "MCE: Killing python:77 due to hardware memory corruption fault at 7fffcab7d000": {
            "killed_task": "python", "killed_pid": 77},
        "MCE 0xb4365: dirty LRU page recovery: Recovered": {
            "pfn": "0xb4365", "page_type": "dirty LRU", "result": "Recovered"},
    }  # fmt: skip
    for line, want in cases.items():
        ev = parse_kernel_line(line, node="gpu-07")
        assert ev is not None and ev.payload["fault"] == "memory_failure", line
        assert {k: ev.payload.get(k) for k in want} == want, line
