"""The healer on Kubernetes, against the fake API server (no kube-apiserver runs here): the
exact PATCH, DELETE and POST requests of cordoning, recreating and returning, and the same
flows as on Slurm (observe, approval, breaker, ownership, a resumed step acting once). GPU
resets, retry budgets and checkpoints are in test_kubernetes_recovery.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from healer import service
from healer.models import ActionState
from tests.collector.kubernetes.fakeapi import FakeKubeAPI, fixture
from tests.healer.helpers import XID31, XID79, acting, by_kind, context, fault, heal
from tests.healer.kube_world import NODES, POD, actor, started_api, world, writes


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    fake = started_api()
    yield fake
    fake.stop()


def test_gpu_fault_cordons_taints_annotates_and_recreates_the_job_elsewhere(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    now = world(session_factory)
    inc = fault(session_factory, XID79, node="gpu-node-07", ts=now)
    ctx = context(session_factory, acting(), {"kubernetes": actor(api)})
    heal(ctx)
    assert writes(api) == [
        ("PATCH", "/api/v1/nodes/gpu-node-07"),
        ("DELETE", f"/api/v1/namespaces/{POD}".replace("ml-research/", "ml-research/pods/")),
        (
            "DELETE",
            "/apis/batch/v1/namespaces/ml-research/jobs/train-llama?propagationPolicy=Background",
        ),
        ("POST", "/apis/batch/v1/namespaces/ml-research/jobs"),
    ]
    patch = api.writes[0][2]
    assert patch["spec"]["unschedulable"] is True
    assert {"key": "fleetmedic.io/unhealthy", "value": "gpu_hardware", "effect": "NoSchedule"} in (
        patch["spec"]["taints"]
    )
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in (
        patch["spec"]["taints"]  # the node's own taint is kept
    )
    notes = patch["metadata"]["annotations"]
    assert notes["fleetmedic.io/cordoned-by"] == "fleetmedic"
    assert notes["fleetmedic.io/incident"] == str(inc.id)
    assert notes["fleetmedic.io/reason"] == f"fleetmedic: gpu_hardware Xid 79 [incident {inc.id}]"
    new = api.writes[3][2]
    assert new["metadata"]["name"].startswith("train-llama-r")
    assert "uid" not in new["metadata"] and "selector" not in new["spec"]
    assert new["metadata"]["labels"]["fleetmedic.io/recovery-of"] == "train-llama"
    tmpl = new["spec"]["template"]
    assert "batch.kubernetes.io/controller-uid" not in tmpl["metadata"]["labels"]
    terms = tmpl["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-node-07"]}]}
    ]
    env = {e["name"]: e.get("value") for e in tmpl["spec"]["containers"][0]["env"]}
    assert env["FLEETMEDIC_CHECKPOINT_DIR"] == "/shared/ckpt/llama-7b"  # the user's env kept
    kinds = by_kind(session_factory)
    assert [a.state for a in kinds["drain"] + kinds["recover"] + kinds["notify"]] == [
        ActionState.DONE
    ] * 3
    with session_factory() as s:
        (link,) = service.job_lineage(s, job_id=POD)
        notices = service.list_notices(s, incident_id=inc.id)
    assert (link.how, link.new_job_id) == ("recreate", f"ml-research/{new['metadata']['name']}")
    assert {n.recipient for n in notices} == {"alice", "oncall"}


def test_running_the_steps_again_after_a_crash_changes_nothing_twice(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    now = world(session_factory)
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    ctx = context(session_factory, acting(), {"kubernetes": actor(api)})
    heal(ctx)
    first = writes(api)
    # As if the process died right after each call: every action is running again.
    with session_factory.begin() as s:
        for a in service.list_actions(s):
            service.transition(
                s,
                action_id=int(a.id or 0),
                to=ActionState.RUNNING,
                from_states=[ActionState.DONE],
                now=time.time(),
            )
    heal(ctx)
    assert writes(api) == first  # node already ours, pods gone, new Job already there


def test_observe_mode_plans_and_shows_but_calls_nothing(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    now = world(session_factory)
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    from healer.policy import Policy

    heal(context(session_factory, Policy(), {"kubernetes": actor(api)}), passes=2)
    assert api.writes == []
    kinds = by_kind(session_factory)
    assert {k: [(a.state.value, a.mode.value) for a in v] for k, v in kinds.items()} == {
        "drain": [("planned", "observe")],
        "recover": [("planned", "observe")],
        "notify": [("planned", "observe")],
    }


def test_approval_mode_waits_for_an_admin_and_reject_never_runs(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    from healer.policy import Policy, Scope

    now = world(session_factory)
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    policy = Policy(act=[Scope(approval=True)])
    ctx = context(session_factory, policy, {"kubernetes": actor(api)})
    heal(ctx, passes=2)
    assert api.writes == []
    kinds = by_kind(session_factory)
    with session_factory.begin() as s:
        service.approve(s, action_id=int(kinds["drain"][0].id or 0), by="admin:bob", now=now)
        service.reject(s, action_id=int(kinds["recover"][0].id or 0), by="admin:bob", now=now)
    heal(ctx)
    assert writes(api) == [("PATCH", "/api/v1/nodes/gpu-node-07")]
    kinds = by_kind(session_factory)
    assert kinds["drain"][0].approved_by == "admin:bob"
    assert kinds["recover"][0].state is ActionState.CANCELLED
    with session_factory() as s:
        trail = service.list_audit(s, action_id=int(kinds["drain"][0].id or 0))
    calls = [e for e in trail if e.what == "api" and e.actor == "healer"]
    assert calls and all(e.approved_by == "admin:bob" for e in calls)
    assert any(e.what == "state" and e.actor == "admin:bob" for e in trail)


def test_a_persons_cordon_is_left_alone_and_never_undone(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    node = api.objects["nodes"]["/gpu-node-07"]
    node["spec"]["unschedulable"] = True  # kubectl cordon by a person: no annotations of ours
    api.apply("nodes", node)
    now = world(session_factory)
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    ctx = context(
        session_factory,
        acting(validation_command=["true"], return_after_quiet_s=0),
        {"kubernetes": actor(api)},
        runner=lambda argv, timeout: None,
    )
    heal(ctx, passes=3)
    assert ("PATCH", "/api/v1/nodes/gpu-node-07") not in writes(api)
    (drain,) = by_kind(session_factory)["drain"]
    assert drain.result["noop"] and not drain.result["holding"]
    assert "return" not in by_kind(session_factory)


def test_a_person_uncordoning_our_node_cancels_the_workflow_and_our_marks_come_off(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    now = world(session_factory)
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    policy = acting(validation_command=["false"], return_after_quiet_s=3600)
    ctx = context(session_factory, policy, {"kubernetes": actor(api)})
    heal(ctx, passes=2)  # cordoned; a return action waits for the fault to go quiet
    assert by_kind(session_factory)["return"][0].state is not ActionState.CANCELLED
    node = api.objects["nodes"]["/gpu-node-07"]
    node["spec"].pop("unschedulable")  # kubectl uncordon: our taint and annotations remain
    api.apply("nodes", node)
    api.writes.clear()
    report = heal(ctx)
    assert report.released == 1
    assert writes(api) == [("PATCH", "/api/v1/nodes/gpu-node-07")]
    body = api.writes[0][2]
    assert body["metadata"]["annotations"] == {
        "fleetmedic.io/cordoned-by": None,
        "fleetmedic.io/reason": None,
        "fleetmedic.io/incident": None,
    }
    left = api.objects["nodes"]["/gpu-node-07"]
    assert "fleetmedic.io/cordoned-by" not in left["metadata"]["annotations"]
    assert all(t["key"] != "fleetmedic.io/unhealthy" for t in left["spec"]["taints"])
    (ret,) = by_kind(session_factory)["return"]
    assert ret.state is ActionState.CANCELLED and "resumed by a person" in str(ret.error)
    with session_factory() as s:
        assert service.held_nodes(s) == []


def test_an_xid_storm_trips_the_breaker_at_the_cap_and_not_one_node_more(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    now = world(session_factory)
    ctx = context(
        session_factory,
        acting(breaker_max_nodes=2, breaker_max_fraction=1.0),
        {"kubernetes": actor(api)},
    )
    for i, node in enumerate(NODES):
        fault(session_factory, XID79, node=node, ts=now + i, bus=f"0000:{0x3B + i:02x}:00")
    heal(ctx)
    patched = [p for m, p in writes(api) if m == "PATCH"]
    assert patched == ["/api/v1/nodes/gpu-node-07", "/api/v1/nodes/gpu-node-08"]
    drains = by_kind(session_factory)["drain"]
    assert [a.state for a in drains] == [ActionState.DONE, ActionState.DONE, ActionState.CANCELLED]
    assert "cap 2" in str(drains[2].error)
    with session_factory() as s:
        breaker = service.get_breaker(s)
        alerts = [n for n in service.list_notices(s) if "breaker" in n.subject]
    assert breaker.tripped and len(alerts) == 1


def test_pytorchjob_is_recreated_only_when_the_policy_names_it(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    api.apply("pods", fixture("pod_pytorchjob_master.json"))
    api.workloads["pytorchjobs/ml-research/train-gpt"] = fixture("pytorchjob_train.json")
    now = world(session_factory, job="ml-research/train-gpt-master-0")
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    heal(context(session_factory, acting(), {"kubernetes": actor(api, ("Job",))}))
    assert all("pytorchjobs" not in p for _, p in writes(api))  # not named: left alone
    (rec,) = by_kind(session_factory)["recover"]
    assert rec.result["noop"] and "PyTorchJob" in rec.result["note"]


def test_pytorchjob_recreation_moves_every_replica_away(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    api.apply("pods", fixture("pod_pytorchjob_master.json"))
    api.apply("pods", fixture("pod_pytorchjob_worker.json"))
    api.workloads["pytorchjobs/ml-research/train-gpt"] = fixture("pytorchjob_train.json")
    now = world(session_factory, job="ml-research/train-gpt-master-0")
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    heal(context(session_factory, acting(), {"kubernetes": actor(api, ("Job", "PyTorchJob"))}))
    deletes = sorted(p for m, p in writes(api) if m == "DELETE")
    assert deletes == [
        "/api/v1/namespaces/ml-research/pods/train-gpt-master-0",
        "/api/v1/namespaces/ml-research/pods/train-gpt-worker-0",
        "/apis/kubeflow.org/v1/namespaces/ml-research/pytorchjobs/train-gpt"
        "?propagationPolicy=Background",
    ]
    (post,) = [b for m, p, b in api.writes if m == "POST"]
    for replica in post["spec"]["pytorchReplicaSpecs"].values():
        spec: dict[str, Any] = replica["template"]["spec"]
        term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["gpu-node-07"]


def test_a_users_own_fault_touches_no_node_and_tells_the_owner(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    now = world(session_factory)
    inc = fault(session_factory, XID31, node="gpu-node-07", ts=now)
    assert inc.category == "user_code"
    heal(context(session_factory, acting(), {"kubernetes": actor(api)}), passes=2)
    assert api.writes == []
    with session_factory() as s:
        notices = service.list_notices(s)
    assert [(n.kind, n.recipient) for n in notices] == [("owner", "alice")]
    assert "no node was touched" in notices[0].body
