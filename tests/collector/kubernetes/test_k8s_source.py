"""The Kubernetes source against the fake API server: list, watch, 410, drops, outages, garbage."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pydantic import SecretStr

from collector.kubernetes import KubernetesSource, build_kubernetes_source
from tests.collector.kubernetes.fakeapi import FakeKubeAPI, fixture
from tests.collector.kubernetes.helpers import Sink, make_source, wait_for
from timeline.models import EventKind, Severity
from timeline.settings import Settings

POD = "ml-research/train-llama-0"


def test_collect_lists_gpu_pods_as_jobs_with_allocations_and_nodes(
    fake: FakeKubeAPI, source: KubernetesSource
) -> None:
    for ev in fixture("events.json")[:2]:
        fake.apply("events", ev)
    obs = source.collect()
    assert [j.job_id for j in obs.jobs] == [POD]  # the CPU-only coredns pod is not a job
    job = obs.jobs[0]
    assert (job.state, job.gpus, job.nodes, job.user) == ("Running", 8, ["gpu-node-07"], "alice")
    assert [(a.job_id, a.node, a.gpu_index, a.end_ts) for a in obs.allocations] == [
        (POD, "gpu-node-07", None, None)
    ]
    assert [(n.name, n.state, n.gpu_count) for n in obs.nodes] == [("gpu-node-07", "Ready", 8)]
    reasons = {e.payload["reason"] for e in obs.events if e.kind == EventKind.POD_EVENT}
    assert reasons == {"FailedScheduling", "BackOff"}
    backoff = next(e for e in obs.events if e.payload.get("reason") == "BackOff")
    assert backoff.node == "gpu-node-07"
    assert all(source.resource_version.values())
    assert source.health.total_errors() == 0 and source.health.total_parse_failures() == 0


def test_watch_reports_oomkilled_with_exit_code_137(
    fake: FakeKubeAPI, streaming: tuple[KubernetesSource, Sink]
) -> None:
    _, sink = streaming
    fake.apply("pods", fixture("pod_gpu_oomkilled.json"))
    wait_for(lambda: any(e.code == 137 for e in sink.events(EventKind.JOB_STATE)), "OOM event")
    ev = next(e for e in sink.events(EventKind.JOB_STATE) if e.code == 137)
    assert ev.severity == Severity.ERROR and ev.job_id == POD and ev.node == "gpu-node-07"
    assert ev.payload["termination"]["reason"] == "OOMKilled"
    assert ev.payload["from"] == "Running" and ev.payload["to"] == "Failed"
    job = sink.jobs(POD)[-1]
    assert (job.state, job.exit_code, job.reason) == ("Failed", 137, "OOMKilled")


def test_container_restarted_after_oom_is_reported_while_the_pod_keeps_running(
    fake: FakeKubeAPI, streaming: tuple[KubernetesSource, Sink]
) -> None:
    _, sink = streaming
    fake.apply("pods", fixture("pod_gpu_restarted_oom.json"))
    job_id = "ml-research/serve-vllm-5f6f7cf698-75crd"
    wait_for(lambda: sink.jobs(job_id), "restarted pod")
    job = sink.jobs(job_id)[-1]
    assert (job.state, job.restart_count, job.user, job.gpus) == ("Running", 1, "bob", 1)
    (ev,) = [e for e in sink.events(EventKind.JOB_STATE) if e.job_id == job_id]
    assert ev.code == 137 and ev.payload["termination"]["current"] is False


def test_failed_scheduling_and_node_not_ready_are_reported(
    fake: FakeKubeAPI, streaming: tuple[KubernetesSource, Sink]
) -> None:
    _, sink = streaming
    events = fixture("events.json")
    for ev in events:
        fake.apply("events", ev)
    fake.apply("nodes", fixture("node_gpu_notready.json"))
    wait_for(lambda: len(sink.events(EventKind.POD_EVENT)) == len(events), "all events")
    wait_for(lambda: len(sink.events(EventKind.NODE_STATE)) == 2, "node state change")
    by_reason = {
        (e.payload["reason"], e.payload["involved_object"]["kind"]): e
        for e in sink.events(EventKind.POD_EVENT)
    }
    assert by_reason[("FailedScheduling", "Pod")].job_id == "ml-research/train-llama-1"
    pod_not_ready = by_reason[("NodeNotReady", "Pod")]
    assert pod_not_ready.job_id == POD and pod_not_ready.node == "gpu-node-07"
    assert by_reason[("NodeNotReady", "Node")].node == "gpu-node-07"
    assert by_reason[("OOMKilling", "Node")].node == "gpu-node-07"
    assert {"Evicted", "UnexpectedAdmissionError", "BackOff"} <= {r for r, _ in by_reason}
    first, node_ev = sink.events(EventKind.NODE_STATE)  # first sight at list, then the change
    assert (first.payload["from"], first.payload["to"]) == (None, "Ready")
    assert (node_ev.payload["from"], node_ev.payload["to"]) == ("Ready", "Unknown")
    assert node_ev.severity == Severity.WARNING
    assert "node.kubernetes.io/unreachable:NoExecute" in {
        f"{t['key']}:{t['effect']}" for t in node_ev.payload["taints"]
    }


def test_event_seen_again_with_a_higher_count_is_new_but_a_replay_is_not(
    fake: FakeKubeAPI, streaming: tuple[KubernetesSource, Sink]
) -> None:
    _, sink = streaming
    ev = fixture("events.json")[0]
    fake.apply("events", ev)
    fake.apply("events", ev)  # MODIFIED with the same count: the same fact
    ev["count"] = 7
    fake.apply("events", ev)
    wait_for(lambda: any(e.count == 7 for e in sink.events(EventKind.POD_EVENT)), "count 7")
    assert sorted(e.count for e in sink.events(EventKind.POD_EVENT)) == [6, 7]


def test_410_gone_relists_without_losing_or_duplicating(
    fake: FakeKubeAPI, streaming: tuple[KubernetesSource, Sink]
) -> None:
    source, sink = streaming
    second = fixture("pod_gpu_restarted_oom.json")
    fake.apply("pods", second)
    wait_for(lambda: sink.jobs("ml-research/serve-vllm-5f6f7cf698-75crd"), "second pod")
    before = len(sink.events(EventKind.JOB_STATE))
    fake.held = True  # changes below reach the source only through the relist
    fake.apply("pods", fixture("pod_gpu_oomkilled.json"))
    fake.delete("pods", second)
    fake.compact()
    fake.drop_watches()
    fake.held = False
    wait_for(lambda: source.stats["relists_410"] >= 1, "relist after 410")
    wait_for(lambda: len(sink.events(EventKind.JOB_STATE)) >= before + 2, "changes after relist")
    job_events = sink.events(EventKind.JOB_STATE)
    keys = [e.dedup_key for e in job_events]
    assert len(keys) == len(set(keys)), "a JOB_STATE event was emitted twice"
    assert [e.code for e in job_events if e.job_id == POD and e.code == 137] == [137]
    gone = [e for e in job_events if e.payload["deleted"]]
    assert [e.job_id for e in gone] == ["ml-research/serve-vllm-5f6f7cf698-75crd"]
    assert source.health.errors["watch_expired_410"] >= 1


def test_dropped_connection_resumes_from_the_last_resource_version(
    fake: FakeKubeAPI, streaming: tuple[KubernetesSource, Sink]
) -> None:
    source, sink = streaming
    lists_before = source.stats["lists"]
    rv = fake.apply("pods", fixture("pod_gpu_restarted_oom.json"))
    wait_for(lambda: source.resource_version["pods"] == str(rv), "first change")
    fake.drop_watches()
    fake.apply("pods", fixture("pod_gpu_oomkilled.json"))
    wait_for(lambda: any(e.code == 137 and e.job_id == POD for e in sink.events()), "resume")
    watches = [q for k, q in fake.requests if k == "pods" and q.get("watch") == "true"]
    assert any(q.get("resourceVersion") == str(rv) for q in watches)
    assert source.stats["lists"] == lists_before, "a drop must resume, not relist"
    assert source.health.errors["connection_dropped"] >= 1


def test_api_down_backs_off_then_recovers(
    fake: FakeKubeAPI, streaming: tuple[KubernetesSource, Sink]
) -> None:
    source, sink = streaming
    fake.stop()
    wait_for(lambda: source.health.errors["api_unreachable"] >= 3, "several failed retries")
    waits = list(source.backoffs)
    assert max(waits) > min(waits), "retries must back off"
    fake.apply("pods", fixture("pod_gpu_oomkilled.json"))  # happens while the API is down
    fake.start()
    wait_for(lambda: any(e.code == 137 for e in sink.events(EventKind.JOB_STATE)), "recovery")


def test_malformed_objects_are_counted_and_skipped(fake: FakeKubeAPI) -> None:
    fake.apply(
        "pods",
        {
            "kind": "Pod",
            "metadata": {"name": "bad", "namespace": "x"},
            "spec": {"containers": "oops"},
        },
    )
    source = make_source(fake)
    obs = source.collect()
    assert [j.job_id for j in obs.jobs] == [POD]
    assert source.health.parse_failures["pod_object"] == 1
    sink, stop = Sink(), threading.Event()
    fake.raw_line("pods", "this is not json")
    fake.raw_line("pods", '{"type": "ADDED", "object": "nope"}')
    fake.apply("events", {"metadata": {"name": "e", "uid": "u"}, "reason": "X"})  # no timestamp
    fake.apply("pods", fixture("pod_gpu_oomkilled.json"))
    threading.Thread(target=source.watch_loop, args=("pods", sink, stop), daemon=True).start()
    threading.Thread(target=source.watch_loop, args=("events", sink, stop), daemon=True).start()
    try:
        wait_for(lambda: any(e.code == 137 for e in sink.events()), "good pod after garbage")
        wait_for(lambda: source.health.parse_failures["event_object"] == 1, "bad event counted")
        assert source.health.parse_failures["pods_watch_line"] == 1
        assert source.health.parse_failures["pods_watch_event"] == 1
    finally:
        stop.set()
        fake.drop_watches()


def test_wrong_token_is_counted_and_never_crashes(fake: FakeKubeAPI) -> None:
    source = make_source(fake, token="wrong")
    obs = source.collect()
    assert obs.is_empty()
    assert source.health.errors["unauthorized_401"] == 3  # nodes, pods, events
    assert fake.unauthorized == 3


def test_build_kubernetes_source_reads_host_and_token_from_settings(fake: FakeKubeAPI) -> None:
    settings = Settings(
        kubernetes_host=fake.url, kubernetes_token=SecretStr("test-token"), kubernetes_cluster="lab"
    )
    obs = build_kubernetes_source(settings).collect()
    assert [(j.job_id, j.cluster) for j in obs.jobs] == [(POD, "lab")]


def test_bookmark_advances_the_resource_version_and_emits_nothing(
    fake: FakeKubeAPI, streaming: tuple[KubernetesSource, Sink]
) -> None:
    source, sink = streaming
    emitted = len(sink.batches)
    fake.bookmark("pods")
    wait_for(lambda: source.resource_version["pods"] == str(fake.rv), "bookmark seen")
    assert len(sink.batches) == emitted


def test_api_down_at_start_backs_off_then_lists(fake: FakeKubeAPI) -> None:
    fake.stop()
    source, sink, stop = make_source(fake), Sink(), threading.Event()
    thread = threading.Thread(target=source.watch_loop, args=("pods", sink, stop), daemon=True)
    thread.start()
    try:
        wait_for(lambda: source.health.errors["api_unreachable"] >= 2, "failed lists")
        assert source.resource_version["pods"] is None and not sink.batches
        fake.start()
        wait_for(lambda: sink.jobs(POD), "list once the API is back")
    finally:
        stop.set()
        fake.drop_watches()
        thread.join(timeout=10)


def test_normal_events_are_kept_for_gpu_pods_and_nodes_only(
    fake: FakeKubeAPI, source: KubernetesSource
) -> None:
    pulled = fixture("events.json")[1]
    pulled.update(type="Normal", reason="Pulled", message="Container image already present")
    gpu_pod = dict(pulled, metadata=dict(pulled["metadata"], uid="e-gpu", name="e-gpu"))
    gpu_pod["involvedObject"] = dict(pulled["involvedObject"], name="train-llama-0")
    cpu_pod = dict(pulled, metadata=dict(pulled["metadata"], uid="e-cpu", name="e-cpu"))
    cpu_pod["involvedObject"] = dict(
        pulled["involvedObject"], namespace="kube-system", name="coredns-6f6b679f8f-5m7kq"
    )
    fake.apply("events", gpu_pod)
    fake.apply("events", cpu_pod)
    events = source.collect().events
    pod_events = [e.job_id for e in events if e.kind == EventKind.POD_EVENT]
    assert pod_events == [POD]


def test_build_kubernetes_source_falls_back_to_kubeconfig(
    fake: FakeKubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {{server: "{fake.url}"}}
users:
- name: fleetmedic
  user: {{token: test-token}}
contexts:
- name: lab
  context: {{cluster: lab, user: fleetmedic}}
current-context: lab
"""
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    obs = build_kubernetes_source(Settings()).collect()
    assert [j.job_id for j in obs.jobs] == [POD]


def test_a_list_answer_that_is_not_json_is_counted(fake: FakeKubeAPI) -> None:
    fake.garbage_lists = True
    source = make_source(fake)
    assert source.collect().is_empty()
    assert source.health.parse_failures["pods_list"] == 1
    assert source.health.total_errors() == 0
    fake.garbage_lists = False
    assert [j.job_id for j in source.collect().jobs] == [POD]
