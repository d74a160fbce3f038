"""Probe set thirty (Kueue): a Workload's eviction, deactivation and quota messages.

Read from kubernetes-sigs/kueue @ff69552e79ad: pkg/workload/evict/evict.go (the event reason
"EvictedDueTo<reason>", patching.ReasonWithCause), pkg/scheduler/preemption/preemption.go
(preemptionMessage and its older wordings), pkg/controller/core/workload_controller.go
("Exceeded the PodsReady timeout %s", "exceeding the maximum number of re-queuing retries",
"exceeding the maximum execution time", "Deactivated due to AdmissionCheck in Rejected state"),
pkg/scheduler/flavorassigner/flavorassigner.go ("couldn't assign flavors to pod set %s: ...")
and pkg/controller/tas/node_controller.go / scheduler.go (NodeFailures). Shown as
`kubectl describe workload` / `kubectl get events` print them. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

K = "kubernetes-sigs/kueue {}@ff69552e79"
# kubectl describe's Events rows and kubectl get events' columns
_DESCRIBE = ("  {type}   {reason}  {age}  kueue-admission  ",)
_GET = ("{age}   {type}   {reason}   workload/{wl}   ",)
_EV = {"age": ("2m", "5m (x3 over 30m)"), "wl": ("job-train-7c1d2", "pytorchjob-llm-8b-0e6a1")}
INFRA = ("scheduler", "infra")

FORMATS = (
    Fmt(
        "preempted",
        K.format("pkg/scheduler/preemption/preemption.go"),
        "Preempted to accommodate a workload (UID: {uid}, JobUID: {juid}) due to {why}; "
        "preemptor path: /{cq}; preemptee path: /{cq}\n",
        {
            **_EV,
            "uid": ("5c2b9a1e-7f21-4c55-9d0e-3a1b2c3d4e5f", "UNKNOWN"),
            "juid": ("8d3e0f1a-2b3c-4d5e-6f70-8192a3b4c5d6", "UNKNOWN"),
            "why": (
                "prioritization in the ClusterQueue",
                "reclamation within the cohort",
                "Fair Sharing within the cohort",
                "reclamation within the cohort while borrowing",
            ),
            "cq": ("team-a-cq", "cohort-gpu/team-b-cq"),
            "type": ("Normal",),
            "reason": ("EvictedDueToPreempted", "Preempted"),
        },
        INFRA,
        prefixes=_DESCRIBE + _GET,
    ),
    Fmt(
        "preempted-old",
        K.format("pkg/scheduler/preemption/preemption.go@24617fbb9f"),
        "{msg}\n",
        {
            **_EV,
            "msg": (
                "Preempted to accommodate a higher priority Workload",
                "Preempted to accommodate a workload (UID: 5c2b9a1e-7f21) in the ClusterQueue",
            ),
            "type": ("Normal",),
            "reason": ("Evicted", "Preempted"),
        },
        INFRA,
        prefixes=_DESCRIBE,
    ),
    Fmt(
        "pods-ready-timeout",
        K.format("pkg/controller/core/workload_controller.go"),
        "{msg}\n",
        {
            **_EV,
            "msg": (
                "Exceeded the PodsReady timeout default/job-train-7c1d2",
                "The workload is deactivated due to exceeding the maximum number of re-queuing "
                "retries",
            ),
            "type": ("Normal",),
            "reason": (
                "EvictedDueToPodsReadyTimeout",
                "EvictedDueToDeactivatedDueToRequeuingLimitExceeded",
            ),
        },
        ("scheduler", "unknown"),
        prefixes=_DESCRIBE + _GET,
    ),
    Fmt(
        "max-execution-time",
        K.format("pkg/controller/core/workload_controller.go"),
        "The workload is deactivated due to exceeding the maximum execution time\n",
        {
            **_EV,
            "type": ("Normal",),
            "reason": ("EvictedDueToDeactivatedDueToMaximumExecutionTimeExceeded",),
        },
        ("scheduler", "job"),
        prefixes=_DESCRIBE + _GET,
    ),
    Fmt(
        "admission-check-rejected",
        K.format("pkg/controller/core/workload_controller.go"),
        'Deactivated due to AdmissionCheck in Rejected state: "{ac}" ({m})\n',
        {
            **_EV,
            "ac": ("dws-prov", "multikueue"),
            "m": ("Provisioning request failed", "Workload rejected by the worker cluster"),
            "type": ("Warning",),
            "reason": ("AdmissionCheckRejected",),
        },
        INFRA,
        prefixes=_DESCRIBE + _GET,
    ),
    Fmt(
        "admission-check-retry",
        K.format("pkg/controller/core/workload_controller.go"),
        'Evicted due to AdmissionChecks in Retry state: "{ac}" (Retry); "capacity-check"\n',
        {
            **_EV,
            "ac": ("dws-prov",),
            "type": ("Normal",),
            "reason": ("EvictedDueToAdmissionCheck",),
        },
        INFRA,
        prefixes=_DESCRIBE,
    ),
    Fmt(
        "queue-stopped",
        K.format("apis/kueue/v1beta2/workload_types.go"),
        "The ClusterQueue is stopped\n",
        {
            **_EV,
            "type": ("Normal",),
            "reason": ("EvictedDueToClusterQueueStopped", "EvictedDueToLocalQueueStopped"),
        },
        INFRA,
        prefixes=_GET,
    ),
    Fmt(
        "exceeds-max-quota",
        K.format("pkg/scheduler/flavorassigner/flavorassigner.go"),
        "couldn't assign flavors to pod set {ps}: insufficient quota for {res} in flavor {fl}, "
        "previously considered podsets requests (0) + current podset request ({n}) > maximum "
        "capacity ({cap})\n",
        {
            **_EV,
            "ps": ("main", "worker"),
            "res": ("nvidia.com/gpu", "cpu"),
            "fl": ("h100-spot", "default-flavor"),
            "n": ("64", "512"),
            "cap": ("32", "256"),
            "type": ("Warning",),
            "reason": ("Pending", "ExceedsMaxQuota"),
        },
        ("scheduler", "job"),
        prefixes=_DESCRIBE,
    ),
    Fmt(
        "waiting-for-quota",
        K.format("pkg/scheduler/flavorassigner/flavorassigner.go"),
        "couldn't assign flavors to pod set {ps}: {why}\n",
        {
            **_EV,
            "ps": ("main", "launcher"),
            "why": (
                "insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed",
                "untolerated taint {key=nvidia.com/gpu, value=present, effect=NoSchedule} in "
                "flavor a100",
                "flavor h100 doesn't match node affinity",
            ),
            "type": ("Warning",),
            "reason": ("Pending", "WaitingForQuota"),
        },
        # as kube-scheduler's unschedulable pod: the cluster has no room now
        INFRA,
        prefixes=_DESCRIBE,
    ),
    Fmt(
        "no-replacement-for-node",
        K.format("pkg/scheduler/scheduler.go"),
        "Workload was evicted as there was no replacement for unhealthy node(s): {host}\n",
        {**_EV, "host": HOSTS, "type": ("Normal",), "reason": ("EvictedDueToNodeFailures",)},
        ("node", "node"),
        culprit="host",
        prefixes=_DESCRIBE + _GET,
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_kueue_eviction_or_quota_message_reads_as_documented(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize(
    "msg",
    [
        "Workload eviction triggered due to multiple TAS assigned node failures, including: "
        "gpu-a-07, gpu-b-03",
        "Workload was evicted as there was no replacement for unhealthy node(s): gpu-a-07,gpu-b-03",
    ],
)
def test_several_failed_nodes_name_no_single_culprit(msg: str) -> None:
    got = explain_text(f"  Normal   EvictedDueToNodeFailures  1m  kueue-admission  {msg}\n")
    assert (got.category, got.blame, got.node) == ("node", "node", None), got.explanation


@pytest.mark.parametrize(
    "line",
    [
        # scheduler.go's Normal events of a workload that was admitted
        "  Normal   QuotaReserved  1m  kueue-admission  Quota reserved in ClusterQueue team-a-cq, "
        "wait time since queued was 3s",
        "  Normal   Admitted  1m  kueue-admission  Admitted by ClusterQueue team-a-cq, wait time "
        "since reservation was 0s",
        # workload_controller.go's Requeued condition of a workload going back to its queue, as
        # kubectl describe workload prints it (Slurm's REQUEUED state is capitals only)
        "  Conditions:\n    Last Transition Time:  2025-03-04T10:12:01Z\n    Message:    "
        "           The workload backoff was finished\n    Observed Generation:   1\n    Reason: "
        "               BackoffFinished\n    Status:                True\n    Type:          "
        "        Requeued",
        "    Message:               The workload was reactivated\n    Reason:                "
        "Reactivated\n    Status:                True\n    Type:                  Requeued",
    ],
)
def test_an_admitted_or_requeued_workload_is_no_failure(line: str) -> None:
    assert explain_text(line + "\n").category is None


def test_the_unschedulable_pod_behind_a_pods_ready_timeout_decides() -> None:
    # the timeout says only that the pods were not ready; a pod's own reason is the cause
    text = (
        "  Normal   EvictedDueToPodsReadyTimeout  5m  kueue-admission  Exceeded the PodsReady "
        "timeout default/job-train-7c1d2\n"
        "  Warning  FailedScheduling  6m  default-scheduler  0/8 nodes are available: 8 "
        "Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: 8 No preemption "
        "victims found for incoming pod.\n"
    )
    got = explain_text(text)
    assert got.category == "scheduler" and got.blame != "unknown", got.explanation
