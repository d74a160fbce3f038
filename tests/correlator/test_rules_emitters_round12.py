"""Round twelve: Determined's task-log prefix as a delivery wrapper, kube-scheduler's FitError
(and its HAMi and OpenPAI HiveD extenders' reasons) as a pod that cannot be placed. Every line
is built from the emitter's own format string (cited in correlator/explain/wrappers.py and
correlator/rules/emitters/kube_scheduler.json) with made-up values, never a corpus case."""

from __future__ import annotations

import pytest

from collector.parse.delivery import undelivered_line
from correlator.explain import explain_text
from correlator.explain.wrappers import undelivered
from correlator.rules import first_rule

# --- Determined: TaskLog.Message "[ts] <id[:8] | 8 spaces> [rank=N] || LEVEL: log" ---------

STAMPS = ["2022-06-09T09:22:31.405192Z", "2024-11-30T23:59:59.000000Z", "2023-01-02T03:04:05Z"]
HEADS = [
    "{ts} 8de2ca81 || ",
    "{ts} f6114bb3 [rank=3] || ",
    "{ts}          || INFO: ",  # no container id: 8 spaces keep the columns
    "{ts} a1b2c3d4 [rank=12] || ERROR: ",
    "{ts} 0a1b2c3d || WARNING: ",
]


def _determined(head: str, ts: str, lines: list[str]) -> str:
    prefix = head.format(ts=f"[{ts}]")
    return "\n".join(prefix + ln for ln in lines)


@pytest.mark.parametrize("ts", STAMPS)
@pytest.mark.parametrize("head", HEADS)
def test_determineds_task_log_prefix_is_taken_off_and_names_no_host(head: str, ts: str) -> None:
    line = "RuntimeError: CUDA error: an illegal memory access was encountered"
    got = undelivered(_determined(head, ts, [line, line]))
    assert got.lines == [line, line]
    assert got.hosts == [None, None]  # the container id is Determined's, never a host
    assert undelivered_line(_determined(head, ts, [line])) == line  # the agent reads it so too


def test_determineds_rank_is_kept_as_the_lines_rank() -> None:
    text = _determined("{ts} f6114bb3 [rank=5] || ", STAMPS[0], ["NCCL WARN Cuda failure 'x'"])
    assert undelivered(text).labels == {"NCCL WARN Cuda failure 'x'": {"log_rank": 5}}


@pytest.mark.parametrize(
    "line",
    [
        "[2022-06-09T09:22:31.405192Z] container-9f || ERROR: x",  # an id wider than 8
        "[2022-06-09T09:22:31.405192Z] 8de2ca81 | x",  # no "||"
        "8de2ca81 || x",  # no time stamp
        "a || b",
    ],
)
def test_a_line_only_like_determineds_is_left_as_it_is(line: str) -> None:
    assert undelivered(line).lines == [line]


@pytest.mark.parametrize(
    ("host", "code"), [("5e4bef3a2da3", 1), ("gpu-node-14", 2), ("trial-7-worker-0", 1)]
)
@pytest.mark.parametrize("head", HEADS[:3])
def test_an_elastic_failure_inside_determineds_prefix_reads_as_unwrapped(
    head: str, host: str, code: int
) -> None:
    block = [
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-02-01_10:00:00",
        f"  host      : {host}",
        "  rank      : 0 (local_rank: 0)",
        f"  exitcode  : {code} (pid: 4242)",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    ]
    plain = explain_text("\n".join(block))
    got = explain_text(_determined(head, STAMPS[0], block))
    assert (got.category, got.blame, got.node) == (plain.category, plain.blame, plain.node)
    assert (got.category, got.blame, got.node) == ("user_code", "job", host)


# --- kube-scheduler FitError: "0/%v nodes are available: <count reason, ...>. <postfilter>." --

REASONS = [
    "{n} Insufficient nvidia.com/gpu",
    "{n} Insufficient memory",
    "{n} node(s) didn't match Pod's node affinity/selector",
    "{n} node(s) had untolerated taint {{nvidia.com/gpu: present}}",
    "{n} node(s) were unschedulable",
    "{n} NodeUnfitPod",  # HAMi's FailedNodes reason
    "{n} node unregistered",  # HAMi's, for a node its device plugin never registered
]
PREEMPTION = [
    "",
    " preemption: 0/{t} nodes are available: {t} No preemption victims found for incoming pod.",
    " preemption: 0/{t} nodes are available: {t} Preemption is not helpful for scheduling.",
]
DOWN_TAINTS = [
    "{n} node(s) had untolerated taint {{node.kubernetes.io/unreachable: }}",
    "{n} node(s) had untolerated taint {{node.kubernetes.io/not-ready: }}",
    "{n} node(s) had taint {{node.kubernetes.io/unreachable: }}, that the pod didn't tolerate",
]


def _fit_error(reasons: list[str], post: str) -> str:
    total = len(reasons) + 2
    hist = ", ".join(sorted(r.format(n=1 + i % 2) for i, r in enumerate(reasons)))
    msg = f"0/{total} nodes are available: {hist}.{post.format(t=total)}"
    return f"  Warning  FailedScheduling  3m (x4 over 9m)  default-scheduler  {msg}"


@pytest.mark.parametrize("post", PREEMPTION)
@pytest.mark.parametrize("i", range(len(REASONS)))
def test_a_fit_error_is_a_pod_that_cannot_be_placed(i: int, post: str) -> None:
    got = explain_text(_fit_error([REASONS[i], REASONS[(i + 3) % len(REASONS)]], post))
    assert (got.category, got.blame, got.node) == ("scheduler", "infra", None)
    assert got.confidence >= 0.75


def test_the_older_fit_error_reads_the_same() -> None:
    line = (
        "FailedScheduling  No nodes are available that match all of the following predicates:: "
        "Insufficient nvidia.com/gpu (3), PodToleratesNodeTaints (1)."
    )
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("scheduler", "infra", None)


@pytest.mark.parametrize("taint", DOWN_TAINTS)
@pytest.mark.parametrize("post", PREEMPTION)
def test_a_fit_error_past_an_unreachable_node_stays_scheduler_with_less_confidence(
    taint: str, post: str
) -> None:
    got = explain_text(_fit_error([taint, REASONS[0]], post))
    plain = explain_text(_fit_error([REASONS[3], REASONS[0]], post))
    assert (got.category, got.blame, got.node) == ("scheduler", "infra", None)
    assert got.confidence < plain.confidence
    assert "unreachable or not-ready" in got.explanation  # the other reading is said


def test_a_node_failure_the_text_shows_still_outranks_the_pod_it_left_unplaced() -> None:
    text = "\n".join(
        [
            "  Normal   NodeNotReady  5m  node-controller  Node gpu-3 status is now: NodeNotReady",
            _fit_error([DOWN_TAINTS[0], REASONS[0]], PREEMPTION[2]),
        ]
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-3")


# --- HAMi FilteringFailed: "no available node, %d nodes do not meet", "%d nodes %s(%s)" -----


@pytest.mark.parametrize(
    "line",
    [
        "Warning  FilteringFailed   67s   hami-scheduler  no available node, 3 nodes do not meet",
        "Warning  FilteringFailed   2s   hami-scheduler  no available node, 12 nodes do not meet",
        "no available node, all node scores do not meet",
        "Warning  FilteringFailed  16s (x2 over 16s)  hami-scheduler  "
        "1 nodes CardInsufficientMemory(gpu-a)",
        "2 nodes NodeInsufficientDevice(gpu-a,gpu-b)",
        "4 nodes ResourceQuotaNotFit(n1,n2,n3,n4)",
    ],
)
def test_hamis_filtering_failed_is_a_pod_that_cannot_be_placed(line: str) -> None:
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("scheduler", "infra", None)


def test_hamis_unhealthy_card_is_not_read_as_a_scheduling_miss() -> None:
    found = first_rule("1 nodes CardNotHealth(gpu-a)")
    assert found is None or found[0].name != "hami_filtering_failed"


# --- OpenPAI HiveD: "Pod is waiting for preemptible or free resource to appear: <reason>" ------

WAIT_REASONS = [
    "insufficient free cell in the VC at the preassigned level (2) when scheduling in VC prod",
    "have to use at least one non-suggested node 10.1.2.3 when scheduling in VC default",
    "VC research has no cell for chain DGX2-V100",
]


@pytest.mark.parametrize("reason", WAIT_REASONS)
@pytest.mark.parametrize("in_fit_error", [False, True])
def test_hiveds_waiting_pod_cannot_be_placed(reason: str, in_fit_error: bool) -> None:
    wait = f"Pod is waiting for preemptible or free resource to appear: {reason}"
    line = f"0/6 nodes are available: 1 {wait}, 5 Insufficient cpu." if in_fit_error else wait
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("scheduler", "infra", None)


@pytest.mark.parametrize(
    ("address", "vc"), [("10.151.40.7", "default"), ("gpu-node-7", "prod"), ("0/1.2.3.4", "a")]
)
def test_hiveds_bad_node_wait_is_scheduler_with_less_confidence(address: str, vc: str) -> None:
    reason = f"have to use at least one bad node {address} when scheduling in VC {vc}"
    got = explain_text(f"Pod is waiting for preemptible or free resource to appear: {reason}")
    free = explain_text(f"Pod is waiting for preemptible or free resource to appear: {vc}")
    assert (got.category, got.blame, got.node) == ("scheduler", "infra", None)
    assert got.confidence < free.confidence
    assert "bad node" in got.explanation
