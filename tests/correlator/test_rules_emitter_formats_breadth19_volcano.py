"""Volcano, an emitter family no rule covered before probe set nineteen (issue #11).

Formats, from its own source (volcano-sh/volcano @ed72c7c815):
- pkg/scheduler/cache/cache.go defaultEvictor.Evict: "Pod is evicted, because of %v" (a Warning
  event of reason "Evict" on the pod, and its PodReady condition's message), the reason being
  "preempt" (actions/preempt/preempt.go), "reclaim" (actions/reclaim/reclaim.go) or "shuffle"
  (actions/shuffle/shuffle.go).
- pkg/scheduler/plugins/gang/gang.go and cache/cache.go RecordJobStatusEvent: "%v/%v tasks in
  gang unschedulable: %v" with JobInfo.FitError() (pkg/scheduler/api/job_info.go: "pod group is
  not ready, <n> Pending, <n> minAvailable; Pending: <n> Unschedulable. Origin reason is <task>:
  <fit errors>"), as a Warning "Unschedulable" event on the pod group; api/unschedule_info.go
  FitErrors "0/%v nodes are unavailable: %v."; pkg/controllers/job/job_controller_actions.go
  "PodGroup %s:%s %s, reason: %s" (Warning "PodGroupPending" on the vcjob).
- pkg/controllers/job/job_controller.go: recordJobEvent ExecuteAction "Start to execute action %s
  ", "Execute action %s after %s", "Job failed on action %s for retry limit reached".

Verdicts by the label policy (tests/fixtures/corpus/README.md): a pod the scheduler evicted to
preempt, reclaim or reschedule is a preemption, scheduler / infra; a gang that cannot be placed is
an unschedulable pod, scheduler / infra (already read so before this set, pinned here); the job
controller's actions (restart, abort) name no cause, no verdict by themselves.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

CACHE = "volcano-sh/volcano pkg/scheduler/cache/cache.go@ed72c7c815"
GANG = "volcano-sh/volcano pkg/scheduler/plugins/gang/gang.go@ed72c7c815"
JOBCTL = "volcano-sh/volcano pkg/controllers/job/job_controller.go@ed72c7c815"

SCHED = ("scheduler", "infra")
NONE = (None, "unknown")

_EVENT = (
    "  Warning  Evict  {age}  volcano  ",
    "{age}  Warning  Evict  pod/{pod}  ",
    "    Reason:   Evict\n    Message:  ",
)
_V = {
    "age": ("12s", "3m2s", "2m (x3 over 9m)"),
    "pod": ("llama-worker-0", "train-ps-1", "job-a-master-0"),
}
_FIT = (
    "0/{n} nodes are unavailable: {n} Insufficient nvidia.com/gpu.",
    "0/{n} nodes are unavailable: 2 node(s) resource fit failed, 6 Insufficient nvidia.com/gpu.",
    "all nodes are unavailable: {n} node(s) resource fit failed.",
)
VOLCANO = [
    Fmt(
        "volcano-scheduler-evicted",
        CACHE,
        "Pod is evicted, because of {why}\n",
        {**_V, "why": ("preempt", "reclaim", "shuffle")},
        SCHED,
        prefixes=_EVENT,
    ),
    Fmt(
        "volcano-evicted-then-restart",
        JOBCTL,
        "Pod is evicted, because of {why}\n"
        "  Normal   ExecuteAction  {age}  vc-controller-manager  Start to execute action "
        "{action} \n",
        {**_V, "why": ("preempt", "reclaim"), "action": ("RestartJob", "AbortJob")},
        SCHED,
        prefixes=("  Warning  Evict  {age}  volcano  ",),
    ),
    Fmt(
        "volcano-gang-unschedulable",
        GANG,
        "{k}/{m} tasks in gang unschedulable: pod group is not ready, {k} Pending, {m} "
        "minAvailable; Pending: {k} Unschedulable. Origin reason is {pod}: {fit}\n",
        {**_V, "k": (2, 3), "m": (2, 4), "n": (4, 8), "fit": _FIT},
        SCHED,
        prefixes=("  Warning  Unschedulable  {age}  volcano  ", ""),
    ),
    Fmt(
        "volcano-podgroup-pending",
        "volcano-sh/volcano pkg/controllers/job/job_controller_actions.go@ed72c7c815",
        "PodGroup default:{pod} unschedulable, reason: {k}/{k} tasks in gang unschedulable: "
        "pod group is not ready, {k} Pending, {k} minAvailable; Pending: {k} Unschedulable\n",
        {**_V, "k": (2, 8)},
        SCHED,
        prefixes=("  Warning  PodGroupPending  {age}  vc-controller-manager  ",),
    ),
    Fmt(
        "volcano-job-controller-action",
        JOBCTL,
        "{what}\n",
        {
            **_V,
            "what": (
                "Start to execute action RestartJob ",
                "Start to execute action AbortJob ",
                "Execute action RestartJob after 1m0s",
                "Job failed on action RestartJob for retry limit reached",
            ),
        },
        NONE,
        prefixes=("  Normal   ExecuteAction  {age}  vc-controller-manager  ", ""),
    ),
]


@pytest.mark.parametrize(("f", "text", "node"), params(VOLCANO))
def test_each_volcano_format_reads_as_its_emitter_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params(VOLCANO))
def test_a_volcano_line_names_no_host(f: Fmt, text: str, node: str | None) -> None:
    assert explain_text(text).node is None, text


BENIGN = (
    "  Normal  Scheduled  12s  volcano  Successfully assigned default/llama-worker-0 to gpu-a-07",
    "  Normal  Evict  12s  volcano  preempt",
    "  Normal   ExecuteAction  45s  vc-controller-manager  Start to execute action SyncJob ",
)


@pytest.mark.parametrize("text", BENIGN)
def test_a_benign_volcano_line_is_no_failure(text: str) -> None:
    got = explain_text(text)
    assert got.category is None and got.node is None, got.explanation


def test_a_users_crash_that_volcano_restarts_never_blames_the_node() -> None:
    text = (
        "    State:          Terminated\n      Reason:       Error\n      Exit Code:    1\n"
        "  Normal   ExecuteAction  45s  vc-controller-manager  Start to execute action "
        "RestartJob \n"
    )
    got = explain_text(text)
    assert got.blame != "node" and got.node is None, got.explanation
