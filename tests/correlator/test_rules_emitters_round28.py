"""Round twenty-eight: the kubelet refusing pods for its node's conditions, and slurmctld setting
several nodes DOWN, as their emitters print them.

The kubelet's eviction manager refuses a pod while the node has eviction conditions
(kubernetes/kubernetes pkg/kubelet/eviction/eviction_manager.go, managerImpl.Admit): any pod
under DiskPressure or PIDPressure, a BestEffort pod under MemoryPressure alone. It logs
klog.InfoS("Failed to admit pod to node", "pod", ..., "nodeCondition", m.nodeConditions), and
before structured logging klog/glog.Warningf("Failed to admit pod %s - node has conditions: %v");
the refusal's message is "The node had condition: %v. ", %v printing the list as
[MemoryPressure DiskPressure]. slurmctld logs error("Nodes %s not responding, setting DOWN") per
node or hostlist (SchedMD/slurm src/slurmctld/ping_nodes.c): several nodes set DOWN are several
independent node faults, which settle no culprit. See correlator/rules/emitters/kubelet.json
(evict_node_disk, evict_memory, evict_node_pids) and correlator/explain/reasoning.py. Never a
corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_JOURNAL = "Jun 02 08:14:07 gpu-node-3 kubelet[1187]: "
_OLD = "W0602 08:14:07.120044    1187 eviction_manager.go:159] "
_NEW = "I0602 08:14:07.120044    1187 eviction_manager.go:213] "
_POD = "trainer-7f9c_ml(2b7e1c9a-0c1d-4b8e-9a0e-5f7d3c2a1b00)"


@pytest.mark.parametrize(
    "conditions", ("[DiskPressure]", "[MemoryPressure DiskPressure]", "[DiskPressure PIDPressure]")
)
def test_the_kubelet_refusing_pods_under_disk_pressure_blames_the_node_that_logged_it(
    conditions: str,
) -> None:
    text = f"{_JOURNAL}{_OLD}Failed to admit pod {_POD} - node has conditions: {conditions}\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-node-3")


def test_the_structured_admit_refusal_under_disk_pressure_is_the_same_node_fault() -> None:
    line = '"Failed to admit pod to node" pod="ml/trainer-7f9c" nodeCondition=[DiskPressure]'
    got = explain_text(f"{_JOURNAL}{_NEW}{line}\n")
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-node-3")


def test_the_refusal_message_with_disk_pressure_among_conditions_is_a_node_disk_fault() -> None:
    text = "Warning  Evicted  12s  kubelet  The node had condition: [MemoryPressure DiskPressure]."
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "node")


def test_the_kubelet_refusing_a_pod_under_pid_pressure_is_a_node_fault() -> None:
    text = f"{_JOURNAL}{_OLD}Failed to admit pod {_POD} - node has conditions: [PIDPressure]\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-node-3")


def test_a_refusal_under_memory_pressure_alone_reads_as_the_memory_pressure_message() -> None:
    text = f"{_JOURNAL}{_OLD}Failed to admit pod {_POD} - node has conditions: [MemoryPressure]\n"
    message = "  Warning  Evicted  3s  kubelet  The node had condition: [MemoryPressure].\n"
    for got in (explain_text(text), explain_text(message)):
        assert (got.category, got.blame) == ("oom_host", "job")


def test_an_admit_line_without_a_node_condition_is_not_read_as_pressure() -> None:
    text = f"{_JOURNAL}Failed to admit pod {_POD}: predicate check pending\n"
    assert explain_text(text).category is None


_CTLD = "[2024-03-11T09:{m:02d}:02.284] error: Nodes {node} not responding{down}\n"


def test_slurmctld_setting_one_node_down_names_that_node() -> None:
    text = "".join(
        _CTLD.format(m=m, node="gpu-07", down=down) for m, down in ((1, ""), (3, ", setting DOWN"))
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-07")


def test_slurmctld_setting_two_nodes_down_names_neither_however_often_each_is_named() -> None:
    lines = [
        (1, "gpu-07", ""),
        (2, "gpu-07", ""),
        (3, "gpu-08", ""),
        (4, "gpu-08", ", setting DOWN"),
        (5, "gpu-07", ", setting DOWN"),
    ]
    text = "".join(_CTLD.format(m=m, node=n, down=d) for m, n, d in lines)
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", None)


def test_a_peer_named_most_often_by_socket_errors_is_still_the_culprit() -> None:
    # interconnect peers are a cascade (every survivor names the rank that died), unlike nodes
    line = (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
        "Connection closed by peer [{peer}]:{port}\n"
    )
    text = "".join(
        line.format(peer=p, port=q)
        for p, q in (("10.1.0.5", 4001), ("10.1.0.5", 4002), ("10.1.0.9", 4003))
    )
    got = explain_text(text)
    assert (got.category, got.node) == ("interconnect", "10.1.0.5")
