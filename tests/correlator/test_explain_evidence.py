"""The evidence `explain` quotes shows what its verdict and its culprit rest on, so a paste of
the quoted lines alone (tests/correlator/test_explain_excerpt_metamorphic.py) still reads the
same. Texts are written from the emitters' formats (kubectl describe.go, torch's
ChildFailedError.format_msg, sacct -P, the GPU operator's daemonset names)."""

from __future__ import annotations

from correlator.explain import explain_text
from correlator.explain.evidence import names_host

_CONDITION = (
    "  Ready            Unknown   Sun, 23 Apr 2017 07:47:26 +0300   Sun, 23 Apr 2017 07:48:07 "
    "+0300   NodeStatusUnknown   Kubelet stopped posting node status."
)
DESCRIBE_NODE = f"""Name:               gpu-node-7
Roles:              <none>
CreationTimestamp:  Fri, 21 Apr 2017 23:38:28 +0300
Conditions:
  Type             Status    LastHeartbeatTime                 LastTransitionTime                Reason              Message
  ----             ------    -----------------                 ------------------                ------              -------
{_CONDITION}
"""  # noqa: E501

_ENTRY = """  time      : 2024-07-24_11:39:43
  host      : gpu-node-3
  rank      : {rank} (local_rank: {rank})
  exitcode  : 1 (pid: 287075{rank})
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"""
CHILD_FAILED = f"""torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
{_ENTRY.format(rank=1)}
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
{_ENTRY.format(rank=0)}
============================================================
"""

OPERATOR_POD = """Name:                 nvidia-driver-daemonset-abcde
Namespace:            gpu-operator
Node:                 gpu-node-5/10.0.0.5
Controlled By:  DaemonSet/nvidia-driver-daemonset
Init Containers:
  k8s-driver-manager:
    Image:         nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.1.0
    State:          Waiting
      Reason:       CrashLoopBackOff
"""


def test_a_culprit_read_from_a_describe_header_is_quoted_with_its_condition() -> None:
    got = explain_text(DESCRIBE_NODE)
    assert (got.category, got.node) == ("node", "gpu-node-7")
    assert got.evidence[0] == "Name:               gpu-node-7"  # above the condition, as read
    assert _CONDITION in got.evidence


def test_a_child_failed_block_quotes_its_root_cause_entry_not_its_borders() -> None:
    got = explain_text(CHILD_FAILED)
    assert (got.category, got.blame, got.node) == ("user_code", "job", "gpu-node-3")
    assert got.evidence == [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "[0]:",
        "  host      : gpu-node-3",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : 1 (pid: 2870750)",
    ]


def test_a_sacct_parsable_row_is_quoted_under_its_header() -> None:
    text = "JobID|NodeList|State|ExitCode\n4242|gpu-node-9|COMPLETED|0:0\n"
    got = explain_text(text + "4242.0|gpu-node-9|CANCELLED|0:10\n")
    assert got.node == "gpu-node-9"
    assert got.evidence == ["JobID|NodeList|State|ExitCode", "4242.0|gpu-node-9|CANCELLED|0:10"]


def test_an_operator_pod_quotes_its_name_node_container_and_state() -> None:
    got = explain_text(OPERATOR_POD)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-node-5")
    assert got.evidence == [
        "Name:                 nvidia-driver-daemonset-abcde",
        "Node:                 gpu-node-5/10.0.0.5",
        "  k8s-driver-manager:",
        "    State:          Waiting",
        "      Reason:       CrashLoopBackOff",
    ]


def test_a_host_is_named_as_a_whole_name() -> None:
    assert names_host("Hostname: gpu-node-1.site", "gpu-node-1")
    assert names_host("[GPU-NODE-1:123] crashed", "gpu-node-1")
    assert not names_host("Hostname: gpu-node-10", "gpu-node-1")
    assert not names_host("Hostname: xgpu-node-1", "gpu-node-1")
