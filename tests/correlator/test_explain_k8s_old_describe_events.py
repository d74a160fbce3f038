"""kubectl 1.6-1.9's `describe` Events table reads as the modern one: the same reasons, the node.

Formats (kubernetes/kubernetes): pkg/kubectl/describe.go release-1.6 DescribeEvents, "Events:"
then the header "FirstSeen LastSeen Count From SubObjectPath Type Reason Message" (tab-separated),
a "---------" row and one row an event, its From the EventSource struct printed with %v
("{kubelet gpu-node-07}", "{default-scheduler }"); release-1.7 to 1.9
(pkg/printers/internalversion/describe.go) the same table with formatEventSource's "kubelet,
gpu-node-07"; later releases the "Type Reason Age From Message" table.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

POD = "Name:\t\ttrain-0\nNamespace:\tdefault\nStatus:\t\tFailed\n"
MODERN = (
    "Events:\n  Type     Reason     Age   From                  Message\n"
    "  ----     ------     ----  ----                  -------\n"
)
OLD = (
    "Events:\n"
    "  FirstSeen\tLastSeen\tCount\tFrom\t\t\tSubObjectPath\t\tType\t\tReason\t\t\tMessage\n"
    "  ---------\t--------\t-----\t----\t\t\t-------------\t\t--------\t------\t\t\t-------\n"
)
NODE = "gpu-node-07"
# (type, reason, message) of kubelet events about one pod on NODE
ROWS = [
    ("Warning", "BackOff", "Back-off restarting failed container"),
    (
        "Warning",
        "UnexpectedAdmissionError",
        "Update plugin resources failed due to requested number of devices unavailable for "
        "nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected.",
    ),
    (
        "Warning",
        "Evicted",
        "The node was low on resource: memory. Container train was using 60Gi, which exceeds "
        "its request of 0.",
    ),
    (
        "Warning",
        "Failed",
        'Error: failed to start container "train": Error response from daemon: OCI runtime '
        "create failed: nvidia-container-cli: initialization error: nvml error: driver not loaded",
    ),
]


def _modern(kind: str, reason: str, message: str) -> str:
    return POD + MODERN + f"  {kind:<8} {reason:<24} 4m    kubelet, {NODE}  {message}\n"


def _old(kind: str, reason: str, message: str, source: str) -> str:
    row = f"  4m\t\t4m\t\t1\t{source}\tspec.containers{{train}}\t{kind}\t\t{reason}\t\t{message}\n"
    return POD + OLD + row


@pytest.mark.parametrize("source", ["{kubelet gpu-node-07}", "kubelet, gpu-node-07"])
@pytest.mark.parametrize("row", ROWS, ids=[r[1] for r in ROWS])
def test_an_old_kubectl_describe_event_row_reads_as_the_modern_row_with_its_node(
    row: tuple[str, str, str], source: str
) -> None:
    modern, old = explain_text(_modern(*row)), explain_text(_old(*row, source))
    assert old.category is not None and old.node == NODE
    assert (old.category, old.blame, old.node) == (modern.category, modern.blame, modern.node)
