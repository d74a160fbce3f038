"""Probe set twenty-three: Karpenter's node repair, as its node.health controller logs it.

Read from kubernetes-sigs/karpenter @2266468104f3: pkg/controllers/node/health/controller.go
(deleteNodeClaim logs "deleting unhealthy node" in controller-runtime's JSON, with the
reconciled "Node":{"name":...} and the "NodeClaim") and events.go (NodeRepairBlocked "more than
%s nodes are unhealthy in the nodepool" / "more then %s nodes are unhealthy in the cluster").
A deleted unhealthy node is that node's (node/node); a blocked repair states no node's fault.
Never a corpus case.
"""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text

NODES = (
    "ip-10-0-12-34.us-west-2.compute.internal",
    "ip-192-168-4-17.ec2.internal",
    "gke-gpu-pool-1a2b3c4d-x9z8",
    "aks-gpupool-12345678-vmss000003",
)


def _deleting(node: str, k: int) -> str:
    """controller-runtime's JSON line for deleteNodeClaim (keys in zap's order)."""
    line = {
        "level": "INFO",
        "time": f"2026-08-20T10:1{k}:02.123Z",
        "logger": "controller",
        "message": "deleting unhealthy node",
        "commit": "2266468",
        "controller": "node.health",
        "controllerGroup": "",
        "controllerKind": "Node",
        "Node": {"name": node},
        "namespace": "",
        "name": node,
        "reconcileID": f"5b9f6a1e-8c5e-4f2b-9a51-0d6c7f0e{k:04d}",
        "NodeClaim": {"name": f"gpu-{k:05d}"},
    }
    return json.dumps(line, separators=(",", ":")) + "\n"


@pytest.mark.parametrize("k", range(len(NODES)))
def test_karpenter_deleting_an_unhealthy_node_blames_that_node(k: int) -> None:
    text = _deleting(NODES[k], k)
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", NODES[k]), (
        text,
        got.explanation,
    )


@pytest.mark.parametrize(
    "message",
    [
        "more than 20% nodes are unhealthy in the nodepool",
        "more then 20% nodes are unhealthy in the cluster",
    ],
)
@pytest.mark.parametrize("k", [0, 2])
def test_a_blocked_node_repair_shows_nothing(message: str, k: int) -> None:
    text = (
        "LAST SEEN   TYPE      REASON              OBJECT                 MESSAGE\n"
        f"3m          Warning   NodeRepairBlocked   node/{NODES[k]}   {message}\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == (None, "unknown"), (text, got.explanation)


def test_a_routine_karpenter_disruption_line_blames_no_node() -> None:
    text = (
        '{"level":"INFO","time":"2026-08-20T10:11:02.123Z","logger":"controller",'
        '"message":"disrupting node(s)","commit":"2266468","controller":"disruption",'
        '"command-id":"a1b2","reason":"underutilized","decision":"delete",'
        '"disrupted-node-count":1,"replacement-node-count":0,"pod-count":0,'
        '"disrupted-nodes":[{"Node":{"name":"ip-10-0-12-34.us-west-2.compute.internal"},'
        '"NodeClaim":{"name":"gpu-00001"},"capacity-type":"on-demand",'
        '"instance-type":"p5.48xlarge"}],"replacement-nodes":[]}\n'
    )
    got = explain_text(text)
    assert got.blame != "node", (text, got.explanation)
