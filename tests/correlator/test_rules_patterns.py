"""Log-pattern rules: one real line per rule family, classified as one event alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.parse.joblog import parse_job_text
from correlator.rules import PATTERNS, classify_event, classify_text
from correlator.taxonomy import Blame, Category
from timeline.models import Event, EventKind

# Real lines: the H100 fault report recorded for this project and the public corpus excerpts.
H100_FAULTS = json.loads(
    (
        Path(__file__).resolve().parents[1] / "fixtures" / "explain" / "h100_fault_report.json"
    ).read_text("utf-8")
)
CASES = [
    # (real line, category, blame, root cause?)
    (
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        Category.GPU_HARDWARE,
        Blame.NODE,
        True,
    ),
    (
        "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
        Category.GPU_HARDWARE,
        Blame.NODE,
        True,
    ),
    (
        "hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
        "172.36.143.59<44206> with status=12 opcode=129 len=65536 vendor err 129 (Recv)",
        Category.INTERCONNECT,
        Blame.INFRA,
        True,
    ),
    (
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        Category.USER_CODE,
        Blame.JOB,
        True,
    ),
    (
        "/opt/conda/conda-bld/pytorch_1720538643151/work/aten/src/ATen/native/cuda/Indexing.cu:1231:"
        " indexSelectSmallIndex: block: [31,0,0], thread: [29,0,0] Assertion "
        "`srcIndex < srcSelectDimSize` failed.",
        Category.USER_CODE,
        Blame.JOB,
        True,
    ),
    (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a "
        "total capacty of 6.00 GiB of which 0 bytes is free.",
        Category.OOM_GPU,
        Blame.JOB,
        True,
    ),
    (
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.",
        Category.OOM_HOST,
        Blame.JOB,
        True,
    ),
    (
        "slurmstepd: error: *** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 "
        "DUE TO TIME LIMIT ***",
        Category.SCHEDULER,
        Blame.JOB,
        True,
    ),
    (
        "  slurmstepd: error: *** JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 "
        "DUE TO PREEMPTION ***",
        Category.SCHEDULER,
        Blame.INFRA,
        True,
    ),
    (
        "  Warning  FailedScheduling  3s (x5 over 9s)  default-scheduler  0/6 nodes are available: "
        "3 node(s) didn't match node selector, 6 Insufficient nvidia.com/gpu.",
        Category.SCHEDULER,
        Blame.INFRA,
        True,
    ),
    ("Kill task failed root 2024-01-25T15:12:23 ip-10-0-1-23", Category.NODE, Blame.NODE, True),
    ("10.6.0.188   NotReady   10d       v1.7.2", Category.NODE, Blame.NODE, True),
    (
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, "
        "NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600061 milliseconds "
        "before timing out.",
        Category.NCCL_TIMEOUT_UNKNOWN,
        Blame.UNKNOWN,
        False,
    ),
]


@pytest.mark.parametrize(("line", "category", "blame", "root"), CASES)
def test_pattern_family_classifies_a_real_line(
    line: str, category: Category, blame: Blame, root: bool
) -> None:
    event = Event(ts=0.0, source="test", kind=EventKind.OTHER, raw=line, message=line)
    verdict = classify_event(event)
    assert verdict is not None
    assert (verdict.category, verdict.blame, verdict.root_cause) == (category, blame, root)


@pytest.mark.parametrize(
    ("key", "category"),
    [
        ("illegal_address", Category.USER_CODE),
        ("torch_oob_index", Category.USER_CODE),
        ("torch_oom", Category.OOM_GPU),
    ],
)
def test_real_h100_job_errors_parsed_by_the_collector_are_classified(
    key: str, category: Category
) -> None:
    events = parse_job_text(H100_FAULTS[key]["stderr_tail"])
    verdicts = [v for e in events if (v := classify_event(e)) is not None]
    assert verdicts and {v.category for v in verdicts} == {category}


def test_healthy_status_lines_match_no_rule() -> None:
    for line in (
        "        Double Bit ECC                                 : N/A",
        "        HW Thermal Slowdown                            : Not Active",
        "Unschedulable:      false",
        "p100     Ready      <none>   17h   v1.15.11",
        "epoch 3: loss 0.412, lr 3e-4",
    ):
        assert classify_text(line) is None, line


def test_state_words_count_only_on_scheduler_state_events() -> None:
    # "TIMEOUT" inside free text is not a Slurm job state; on a JOB_STATE event it is.
    assert classify_text("State=TIMEOUT") is None
    state = Event(ts=0.0, source="test", kind=EventKind.JOB_STATE, message="job 4 State=TIMEOUT")
    verdict = classify_event(state)
    assert verdict is not None and verdict.category is Category.SCHEDULER


def test_every_rule_has_a_name_action_and_sane_confidence() -> None:
    names = [r.name for r in PATTERNS]
    assert len(names) == len(set(names))
    for rule in PATTERNS:
        assert rule.action and 0.0 < rule.confidence <= 1.0


def test_needle_gate_never_changes_what_a_rule_matches() -> None:
    # Every line of the corpus and fixtures: the cheap literal gate agrees with the regex.
    root = Path(__file__).resolve().parents[1] / "fixtures"
    lines = [
        line
        for path in sorted((root / "corpus").glob("*.txt")) + sorted((root / "explain").glob("*"))
        for line in path.read_text("utf-8", errors="replace").splitlines()
    ]
    assert len(lines) > 500
    for rule in PATTERNS:
        for line in lines:
            assert rule.search(line, line.lower()) == bool(rule.regex.search(line)), (
                rule.name,
                line,
            )


def test_line_prefilter_never_hides_a_line_that_some_rule_matches() -> None:
    from correlator.rules import could_match

    root = Path(__file__).resolve().parents[1] / "fixtures"
    for path in sorted((root / "corpus").glob("*.txt")):
        for line in path.read_text("utf-8").splitlines():
            if any(rule.regex.search(line) for rule in PATTERNS):
                assert could_match(line.lower()), line
