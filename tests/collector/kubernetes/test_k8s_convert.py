"""Pure conversion of real-shaped Kubernetes JSON to timeline types."""

from __future__ import annotations

import pytest

from collector.kubernetes import convert
from collector.kubernetes.state import ClusterState
from tests.collector.kubernetes.fakeapi import fixture
from timeline.models import EventKind, Severity


def test_oomkilled_pod_becomes_failed_job_with_exit_137_and_reason() -> None:
    job = convert.pod_to_job(
        fixture("pod_gpu_oomkilled.json"),
        cluster="c1",
        gpu_resource="nvidia.com/gpu",
        user_keys=["fleetmedic.io/user"],
    )
    assert job.job_id == "ml-research/train-llama-0"
    assert (job.state, job.reason, job.exit_code) == ("Failed", "OOMKilled", 137)
    assert job.account == "ml-research" and job.user == "alice" and job.cluster == "c1"
    assert job.nodes == ["gpu-node-07"] and job.gpus == 8
    assert job.end_ts == convert.parse_ts("2024-11-17T10:52:19Z")
    alloc = convert.pod_allocation(job)
    assert alloc is not None and alloc.gpu_index is None and alloc.end_ts == job.end_ts


def test_pending_pod_has_no_node_and_no_allocation() -> None:
    job = convert.pod_to_job(
        fixture("pod_pending.json"), cluster="c", gpu_resource="nvidia.com/gpu", user_keys=[]
    )
    assert job.state == "Pending" and job.nodes == [] and job.gpus == 8
    assert convert.pod_allocation(job) is None


def test_init_container_gpus_count_when_larger_than_the_main_containers() -> None:
    pod = fixture("pod_gpu_running.json")
    pod["spec"]["initContainers"] = [
        {"name": "warm", "resources": {"limits": {"nvidia.com/gpu": 9}}}
    ]
    assert convert.pod_gpus(pod, "nvidia.com/gpu") == 9


def test_node_ready_condition_taints_and_gpu_capacity() -> None:
    node = convert.node_to_node(
        fixture("node_gpu.json"), cluster="c", gpu_resource="nvidia.com/gpu", now=5.0
    )
    assert (node.state, node.gpu_count, node.gpu_allocatable) == ("Ready", 8, 8)
    assert node.taints == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    down = convert.node_to_node(
        fixture("node_gpu_notready.json"), cluster="c", gpu_resource="nvidia.com/gpu", now=5.0
    )
    assert down.state == "Unknown"
    assert down.reason == "NodeStatusUnknown: Kubelet stopped posting node status."


def test_failed_scheduling_event_keeps_reason_count_and_pod() -> None:
    raw = fixture("events.json")[0]
    ev = convert.event_to_event(raw, pod_nodes={})
    assert ev.kind == EventKind.POD_EVENT and ev.severity == Severity.WARNING
    assert ev.job_id == "ml-research/train-llama-1" and ev.count == 6
    assert ev.payload["reason"] == "FailedScheduling"
    assert "Insufficient nvidia.com/gpu" in ev.message
    assert ev.ts == convert.parse_ts("2024-11-17T10:36:00Z")
    assert ev.dedup_key == "event:1c4be87e-8e30-425c-b107-2303e71ea325:6"


def test_state_reports_a_pod_change_once() -> None:
    state = ClusterState(clock=lambda: 1.0)
    first = state.pod(fixture("pod_gpu_running.json"))
    again = state.pod(fixture("pod_gpu_running.json"))
    oom = state.pod(fixture("pod_gpu_oomkilled.json"))
    assert len(first.events) == 1 and again.events == []
    assert [e.code for e in oom.events] == [137]
    assert oom.events[0].payload["termination"]["reason"] == "OOMKilled"


@pytest.mark.parametrize(
    "broken",
    [
        {"metadata": {}},
        {"metadata": {"name": "x"}, "spec": {"containers": "oops"}},
        {
            "metadata": {"name": "x"},
            "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "lots"}}}]},
        },
        ["not", "an", "object"],
    ],
)
def test_malformed_pod_raises_malformed_object(broken: object) -> None:
    with pytest.raises(convert.MalformedObject):
        ClusterState().pod(broken)  # type: ignore[arg-type]


def test_failed_init_container_gives_the_pod_its_exit_code() -> None:
    pod = fixture("pod_gpu_oomkilled.json")
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    pod["status"]["initContainerStatuses"] = [
        {
            "name": "fetch-weights",
            "state": {"terminated": {"exitCode": 2, "reason": "Error"}},
            "lastState": {},
            "restartCount": 0,
        }
    ]
    job = convert.pod_to_job(pod, cluster="c", gpu_resource="nvidia.com/gpu", user_keys=[])
    assert (job.exit_code, job.reason) == (2, "Error")


def test_a_user_annotation_or_event_message_with_control_characters_is_cleaned() -> None:
    pod = fixture("pod_gpu_oomkilled.json")
    pod["metadata"].setdefault("annotations", {})["fleetmedic.io/user"] = "al\x00ice\n"
    job = convert.pod_to_job(
        pod, cluster="c1", gpu_resource="nvidia.com/gpu", user_keys=["fleetmedic.io/user"]
    )
    assert job.user == "alice"
    raw = fixture("events.json")[0]
    raw["message"] = "Back-off \x00restarting\x1b[0m failed container"
    ev = convert.event_to_event(raw, pod_nodes={})
    assert ev is not None and ev.message.endswith("Back-off restarting failed container")
