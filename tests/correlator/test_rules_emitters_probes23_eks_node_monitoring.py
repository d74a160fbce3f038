"""Probe set twenty-three: the Amazon EKS node monitoring agent's GPU conditions and events.

Read from aws/eks-node-monitoring-agent @51af5494fde6: monitors/nvidia/dcgm/dcgm_policies.go
(NvidiaXID%dError "detected XID-%d on the instance, review kernel logs for additional
information.", NvidiaXID%dWarning "detected unknown XID-%d ...", NvidiaDoubleBitError "detected
%d Nvidia Double Bit error(s) on location %v", NvidiaNVLinkError "detected %d NVLink errors on
fieldId %v", NvidiaPageRetirement "detected %d SBE, and %d DBE page retirements"),
dcgm_watchfield.go (NvidiaFabricError "GPU fabric health mask 0x%x: %s", FabricManagerNotRunning
"Fabric Manager status: %s"), dcgm_devices.go, dcgm_activediagnostic.go, plugin.go, monitors/neuron
and pkg/manager/node_exporter.go (a Fatal finding is the AcceleratedHardwareReady=False condition;
the others are Node events whose reason is the condition type and message "<Reason>: <Message>").
Printed as `kubectl describe node` shows a condition and `kubectl get events` an event. The Xid
reads by the Xid catalog; the node is the one described. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.rules import xid_verdict

NODES = (
    "ip-10-0-12-34.us-west-2.compute.internal",
    "ip-172-31-5-201.ec2.internal",
    "i-0a1b2c3d4e5f67890",
    "ip-192-168-88-9.eu-west-1.compute.internal",
)
XIDS = (13, 31, 43, 48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
GPU = ("gpu_hardware", "node")


def _describe(node: str, reason: str, message: str) -> str:
    """`kubectl describe node` with the agent's AcceleratedHardwareReady condition row."""
    return (
        f"Name:               {node}\n"
        "Roles:              <none>\n"
        "Labels:             node.kubernetes.io/instance-type=p5.48xlarge\n"
        "Conditions:\n"
        "  Type                      Status  LastHeartbeatTime                 "
        "LastTransitionTime                Reason              Message\n"
        "  ----                      ------  -----------------                 "
        "------------------                ------              -------\n"
        "  MemoryPressure            False   Tue, 18 Aug 2026 10:01:02 +0000   "
        "Tue, 18 Aug 2026 09:00:00 +0000   KubeletHasSufficientMemory   kubelet has sufficient "
        "memory available\n"
        "  AcceleratedHardwareReady  False   Tue, 18 Aug 2026 10:01:02 +0000   "
        f"Tue, 18 Aug 2026 10:01:02 +0000   {reason}   {message}\n"
        "  Ready                     True    Tue, 18 Aug 2026 10:01:02 +0000   "
        "Tue, 18 Aug 2026 09:00:00 +0000   KubeletReady        kubelet is posting ready status\n"
    )


def _event(node: str, reason: str, message: str) -> str:
    """`kubectl get events` with the agent's node event (reason: the condition type)."""
    return (
        "LAST SEEN   TYPE      REASON                     OBJECT                         MESSAGE\n"
        f"2m          Warning   AcceleratedHardwareReady   node/{node}   {reason}: {message}\n"
    )


def _xid_message(xid: int, known: bool) -> tuple[str, str]:
    if known:
        return (
            f"NvidiaXID{xid}Error",
            f"detected XID-{xid} on the instance, review kernel logs for additional information.",
        )
    return (
        f"NvidiaXID{xid}Warning",
        f"detected unknown XID-{xid} on the instance, review kernel logs for additional "
        "information.",
    )


def _want(xid: int) -> tuple[str | None, str]:
    v = xid_verdict(xid)
    return (v.category.value if v.category else None, v.blame.value)


@pytest.mark.parametrize("xid", XIDS)
@pytest.mark.parametrize("known", [True, False])
def test_an_xid_condition_on_a_described_node_reads_by_the_xid_catalog(
    xid: int, known: bool
) -> None:
    node = NODES[xid % len(NODES)]
    text = _describe(node, *_xid_message(xid, known))
    got = explain_text(text)
    assert (got.category, got.blame) == _want(xid), (text, got.explanation)
    if got.blame == "node":
        assert got.node == node, (text, got.explanation)


@pytest.mark.parametrize("xid", XIDS)
def test_an_xid_event_reads_by_the_xid_catalog(xid: int) -> None:
    node = NODES[(xid + 1) % len(NODES)]
    text = _event(node, *_xid_message(xid, xid % 2 == 0))
    got = explain_text(text)
    assert (got.category, got.blame) == _want(xid), (text, got.explanation)


# (reason, message, verdict) as dcgm_policies.go, dcgm_watchfield.go, dcgm_devices.go,
# dcgm_activediagnostic.go and monitors/neuron build them
FINDINGS = (
    ("NvidiaDoubleBitError", "detected 2 Nvidia Double Bit error(s) on location 0", GPU),
    ("NvidiaDoubleBitError", "detected 1 Nvidia Double Bit error(s) on location 1", GPU),
    ("NvidiaPageRetirement", "detected 0 SBE, and 3 DBE page retirements", GPU),
    ("NvidiaNVLinkError", "detected 12 NVLink errors on fieldId 409", ("interconnect", "node")),
    (
        "NvidiaFabricError",
        "GPU fabric health mask 0x4: GPU 3 fabric training failure",
        ("interconnect", "node"),
    ),
    ("FabricManagerNotRunning", "Fabric Manager status: NotRunning", ("node", "node")),
    (
        "NvidiaDeviceCountMismatch",
        "expected 8 GPUs for this instance type but only 7 were detected — possible hardware "
        "failure",
        GPU,
    ),
    (
        "NvidiaDeviceCountMismatch",
        "DCGM detected 8 GPUs but 7 nvidia device files were detected",
        ("node", "node"),
    ),
    (
        "DCGMDiagnosticFailure",
        "DCGM Diagnostic failed for test memory with error: a test error occurred",
        GPU,
    ),
    ("NeuronHBMUncorrectableError", "Discovered HBM Uncorrectable Error", GPU),
    ("NeuronSRAMUncorrectableError", "Discovered SRAM Uncorrectable Error", GPU),
    ("NeuronNCUncorrectableError", "Discovered NC Uncorrectable Error", GPU),
)


@pytest.mark.parametrize(("reason", "message", "want"), FINDINGS)
@pytest.mark.parametrize("k", range(len(NODES)))
def test_a_hardware_condition_blames_the_described_node(
    reason: str, message: str, want: tuple[str, str], k: int
) -> None:
    text = _describe(NODES[k], reason, message)
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, NODES[k]), (text, got.explanation)


@pytest.mark.parametrize(("reason", "message", "want"), FINDINGS)
def test_a_hardware_finding_as_a_bare_line_keeps_its_verdict(
    reason: str, message: str, want: tuple[str, str]
) -> None:
    text = f"{reason}: {message}\n"
    got = explain_text(text)
    assert (got.category, got.blame) == want, (text, got.explanation)


def test_several_condition_messages_joined_by_the_agent_keep_the_hardware_verdict() -> None:
    message = (
        "detected XID-79 on the instance, review kernel logs for additional information.; "
        "detected 2 Nvidia Double Bit error(s) on location 0"
    )
    got = explain_text(_describe(NODES[0], "NvidiaXID79Error", message))
    assert (got.category, got.blame, got.node) == (*GPU, NODES[0]), got.explanation


def test_an_nccl_segfault_event_is_the_jobs_not_the_nodes() -> None:
    text = _event(
        NODES[1],
        "NvidiaNCCLError",
        "NCCL communication error caused by segfault in libnccl.so",
    )
    got = explain_text(text)
    assert got.blame != "node", (text, got.explanation)
    assert got.node is None, (text, got.explanation)


HEALTHY = (
    ("NvidiaGPUIsReady", "Monitoring for the Nvidia GPU system is active"),
    (
        "NeuronAcceleratedHardwareIsReady",
        "Monitoring for the Neuron AcceleratedHardware system is active",
    ),
    ("NvidiaPageRetirement", "detected 2 SBE, and 0 DBE page retirements"),
)


@pytest.mark.parametrize(("reason", "message"), HEALTHY)
def test_a_ready_accelerator_condition_shows_nothing(reason: str, message: str) -> None:
    text = _describe(NODES[2], reason, message).replace(
        "AcceleratedHardwareReady  False", "AcceleratedHardwareReady  True "
    )
    got = explain_text(text)
    assert (got.category, got.blame) == (None, "unknown"), (text, got.explanation)
