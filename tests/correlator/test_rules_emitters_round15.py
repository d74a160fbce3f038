"""Round fifteen: ibstat's port states, a log pasted above an `nvidia-smi -q` document, the
kubelet's admission of a resource the node has none of (and a core/v1 Event's source host), and
link-local IPv6 peers. Every text is built from the emitter's own format (cited in
correlator/explain/readers_ib.py, correlator/rules/emitters/ib_verbs.json, kubelet.json and
correlator/rules/hosts.py) with made-up values, never a corpus case."""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text

# --- ibstat: infiniband-diags ibstat.c port_dump -------------------------------------------------


def _ibstat(ports: list[tuple[str, str, str]]) -> str:
    out = []
    for ca, state, phys in ports:
        out += [
            f"CA '{ca}'",
            "\tCA type: MT4129",
            "\tNumber of ports: 1",
            "\tFirmware version: 28.39.1002",
            "\tPort 1:",
            f"\t\tState: {state}",
            f"\t\tPhysical state: {phys}",
            "\t\tRate: 400",
            "\t\tLink layer: InfiniBand",
        ]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("phys", ["Polling", "Disabled", "LinkErrorRecovery"])
@pytest.mark.parametrize("position", [0, 1, 2])
def test_an_ibstat_port_down_is_an_interconnect_fault_wherever_it_is_listed(
    phys: str, position: int
) -> None:
    ports = [(f"mlx5_{i}", "Active", "LinkUp") for i in range(3)]
    ports[position] = (f"mlx5_{position}", "Down", phys)
    got = explain_text(_ibstat(ports))
    assert (got.category, got.blame) == ("interconnect", "infra")


@pytest.mark.parametrize(
    ("state", "phys"),
    [
        ("Active", "LinkUp"),
        ("Initializing", "LinkUp"),  # waiting for the subnet manager: no physical fault
        ("Armed", "LinkUp"),
    ],
)
def test_ibstat_ports_that_are_up_explain_nothing(state: str, phys: str) -> None:
    got = explain_text(_ibstat([("mlx5_0", "Active", "LinkUp"), ("mlx5_1", state, phys)]))
    assert got.category is None


def test_ibstat_of_one_port_without_its_ca_header_is_read_too() -> None:
    # `ibstat mlx5_0 1` prints the port alone, unindented (port_dump with alone=1)
    text = "Port 1:\nState: Down\nPhysical state: Polling\nRate: 10\nBase lid: 0\n"
    got = explain_text(text)
    assert (got.category, got.blame) == ("interconnect", "infra")


def test_ibstat_through_pdsh_names_the_host_whose_port_is_down() -> None:
    up = _ibstat([("mlx5_0", "Active", "LinkUp")]).splitlines()
    down = _ibstat([("mlx5_0", "Down", "Polling")]).splitlines()
    text = "\n".join([f"gpu-a-01: {ln}" for ln in up] + [f"gpu-a-02: {ln}" for ln in down])
    got = explain_text(text + "\n")
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "gpu-a-02")


# --- a log pasted above a whole nvidia-smi -q document -------------------------------------------

_SMI_DOC = """
==============NVSMI LOG==============

Timestamp                                 : Mon May  6 10:11:12 2024
Driver Version                            : 535.161.08

Attached GPUs                             : 1
GPU 00000000:00:1E.0
    Product Name                          : NVIDIA A10G
    Product Brand                         : NVIDIA
"""


def test_a_log_line_pasted_above_an_nvidia_smi_q_document_is_still_read() -> None:
    log = (
        'May  6 10:11:00 gpu-node-07 dockerd[812]: time="2024-05-06T10:11:00Z" level=error '
        'msg="... stderr: nvidia-container-cli: initialization error: nvml error: driver not '
        'loaded: unknown"'
    )
    got = explain_text(log + "\n" + _SMI_DOC)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-node-07")


def test_the_nvidia_smi_q_document_alone_is_still_nothing_to_explain() -> None:
    assert explain_text(_SMI_DOC).category is None


# --- kubelet admission: pkg/kubelet/lifecycle/predicate.go InsufficientResourceError ----------


def _out_of(resource: str, capacity: int) -> str:
    return (
        f"Warning  OutOf{resource}  2m  kubelet  Node didn't have enough resource: {resource}, "
        f"requested: 10485760, used: 0, capacity: {capacity}"
    )


@pytest.mark.parametrize("resource", ["ephemeral-storage", "memory", "cpu", "example.com/fpga"])
def test_an_admission_the_node_has_none_of_is_the_nodes_fault(resource: str) -> None:
    got = explain_text(_out_of(resource, 0))
    assert (got.category, got.blame) == ("node", "node")


@pytest.mark.parametrize("resource", ["ephemeral-storage", "memory", "cpu"])
def test_an_admission_that_no_longer_fits_stays_a_scheduling_race(resource: str) -> None:
    got = explain_text(_out_of(resource, 20971520))
    assert (got.category, got.blame) == ("scheduler", "infra")


def test_a_gpu_admission_with_no_allocatable_keeps_the_gpu_reading() -> None:
    got = explain_text(_out_of("nvidia.com/gpu", 0))
    assert got.category == "gpu_hardware"


_EVENT = {
    "apiVersion": "v1",
    "involvedObject": {"kind": "Pod", "name": "train-0"},
    "kind": "Event",
    "message": "Node didn't have enough resource: ephemeral-storage, requested: 10485760, "
    "used: 0, capacity: 0",
    "reason": "OutOfephemeral-storage",
    "source": {"component": "kubelet", "host": "gpu-node-07"},
    "type": "Warning",
}
# the API server's field order; kubectl get events -o json pretty-prints it with 4 spaces
_EVENT_ONE_LINE = json.dumps(_EVENT, separators=(",", ":"))
_EVENT_PRETTY = json.dumps(_EVENT, indent=4)


@pytest.mark.parametrize("text", [_EVENT_ONE_LINE, _EVENT_PRETTY], ids=["one-line", "pretty"])
def test_a_kubelet_events_source_host_is_the_node_it_reports_on(text: str) -> None:
    got = explain_text(text + "\n")
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-node-07")


def test_an_events_source_host_does_not_name_another_records_node() -> None:
    # two Events from two kubelets: each record's own host, so no single node is named
    other = _EVENT_PRETTY.replace("gpu-node-07", "gpu-node-09")
    got = explain_text(f"[\n{_EVENT_PRETTY},\n{other}\n]\n")
    assert (got.category, got.blame, got.node) == ("node", "node", None)


# --- link-local IPv6 peers: correlator/rules/hosts.py peer_host --------------------------------


@pytest.mark.parametrize(
    ("peer", "want"),
    [
        ("fe80::966d:ae03:a2:8cf0%ib1<17943>", "fe80::966d:ae03:a2:8cf0%ib1"),
        ("fe80::ba3f:d2ff:fe11:4455%eth0<43210>", "fe80::ba3f:d2ff:fe11:4455%eth0"),
        ("fe80::1%ib0<43210>", None),  # a hand-set address, every link's same one
        ("10.40.7.21<43210>", "10.40.7.21"),
    ],
)
def test_nccls_connect_failure_names_a_link_local_peer_with_its_zone(
    peer: str, want: str | None
) -> None:
    line = (
        "gpu-a-01:12251:12400 [5] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
        f"{peer} failed : Connection refused\n"
    )
    got = explain_text(line)
    assert (got.category, got.node) == ("interconnect", want)
