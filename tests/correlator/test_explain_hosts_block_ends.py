"""A block's host is the host of the block's own lines, not of what the paste shows after it (issue
#11: a wrong node is worse than none).

`kubectl describe node` is built as kubernetes/kubectl pkg/describe/describe.go (eb8363330e83)
describeNode prints it: "Name:", "Roles:", "Labels:" (later labels indented by the tabwriter),
"Annotations:", "CreationTimestamp:", "Taints:", "Unschedulable:", "Lease:" (describeNodeLease),
"Conditions:" with its "  Type Status LastHeartbeatTime ..." table, "Addresses:", "Capacity:",
"Allocatable:", "System Info:", "PodCIDR:", "PodCIDRs:", "ProviderID:", "Non-terminated Pods:"
and "Allocated resources:" (describeNodeResource), then DescribeEvents: "Events:  <none>" or
"Events:" with its "  Type Reason Age From Message" table; kubectl 1.6 printed "Role:",
"Phase:" and "No events." (kubernetes/kubernetes pkg/kubectl/describe.go 8f672ecf2088). Event
and condition rows that show a fault are NVIDIA NVSentinel's (platform-connectors
process_node_events.go 227932c773f5: reason "<check>IsNotHealthy", message "ErrorCode:%s
PCI:%s <mnemonic>; Resolution: %s Recommended Action=%s;", as
test_rules_emitters_probes21_nvsentinel.py builds them).
The fan-out blocks are ClusterShell's `clush -b` (Display.py format_header), Ansible's ad-hoc
"host | CHANGED | rc=0 >>" (minimal.py) and `pssh -i`'s "[1] hh:mm:ss [SUCCESS] host" (task.py),
none of which prints anything after its last block: a new "$ command" ends it.
A failure printed after a healthy block (a pod's log, a training job's error) names no node, or
the host its own line names; a failure inside a block (a condition row, an Events row) still
names the block's node.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.explain.hosts_blocks import describe_node_spans

H = "gpu-node-3"
_TS = "Mon, 01 Jan 2024 10:00:00 +0000"
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
XID = "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus."
FAILURES = {"ecc": ECC, "xid": XID}
# how the paste goes on after the describe output: at once, after a blank line, at a new prompt
AFTER = {"directly": "", "blank_line": "\n", "new_prompt": "$ kubectl logs trainer-0\n"}
_XID_MSG = (
    "ErrorCode:79 PCI:0000:18:00 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS; Resolution: "
    "RESTART_BM Recommended Action=RESTART_BM;"
)
NORMAL_EVENT = "  Normal   Starting                     12m   kubelet   Starting kubelet.\n"
XID_EVENT = (
    f"  SysLogsXIDError  SysLogsXIDErrorIsNotHealthy  2m   syslog-health-monitor  {_XID_MSG}\n"
)


def _condition(ctype: str, status: str, reason: str, message: str) -> str:
    return f"  {ctype:<16} {status:<7} {_TS}   {_TS}   {reason:<28} {message}\n"


HEALTHY_CONDITIONS = (
    _condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient")
    + _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk")
    + _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
)


def describe_node(conditions: str = HEALTHY_CONDITIONS, events: str | None = None) -> str:
    """describeNode's output, every section; `events` None for "Events:  <none>"."""
    head = (
        f"Name:               {H}\n"
        "Roles:              <none>\n"
        f"Labels:             kubernetes.io/hostname={H}\n"
        "                    nvidia.com/gpu.present=true\n"
        "Annotations:        node.alpha.kubernetes.io/ttl: 0\n"
        f"CreationTimestamp:  {_TS}\n"
        "Taints:             <none>\n"
        "Unschedulable:      false\n"
        f"Lease:\n  HolderIdentity:  {H}\n  AcquireTime:     <unset>\n  RenewTime:       {_TS}\n"
        "Conditions:\n"
        "  Type             Status  LastHeartbeatTime                 LastTransitionTime"
        "                Reason                       Message\n"
        "  ----             ------  -----------------                 ------------------"
        "                ------                       -------\n"
    )
    body = (
        f"Addresses:\n  InternalIP:  10.0.3.17\n  Hostname:    {H}\n"
        "Capacity:\n  cpu:             96\n  nvidia.com/gpu:  8\n  pods:            110\n"
        "Allocatable:\n  cpu:             95\n  nvidia.com/gpu:  8\n  pods:            110\n"
        "System Info:\n  Machine ID:                 ec2d9a\n"
        "  Kernel Version:             5.15.0-1051-aws\n  Kubelet Version:            v1.28.3\n"
        "PodCIDR:                      10.244.3.0/24\n"
        "PodCIDRs:                     10.244.3.0/24\n"
        "ProviderID:                   aws:///us-east-1a/i-0abc\n"
        "Non-terminated Pods:          (1 in total)\n"
        "  Namespace  Name       CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age\n"
        "  ---------  ----       ------------  ----------  ---------------  -------------  ---\n"
        "  ml         trainer-0  8 (8%)        8 (8%)      64Gi (6%)        64Gi (6%)      12m\n"
        "Allocated resources:\n"
        "  (Total limits may be over 100 percent, i.e., overcommitted.)\n"
        "  Resource           Requests    Limits\n"
        "  --------           --------    ------\n"
        "  nvidia.com/gpu     8           8\n"
    )
    if events is None:
        tail = "Events:              <none>\n"
    else:
        tail = (
            "Events:\n  Type     Reason                       Age   From      Message\n"
            "  ----     ------                       ----  ----      -------\n" + events
        )
    return head + conditions + body + tail


def describe_node_1_6(ready: str = "True") -> str:
    """kubectl 1.6's describeNode: "Role:", "Phase:", and "No events." with none."""
    return (
        f"Name:\t\t\t{H}\nRole:\t\t\t\nLabels:\t\t\tkubernetes.io/hostname={H}\n"
        "Taints:\t\t\t<none>\n"
        f"CreationTimestamp:\t{_TS}\nPhase:\t\t\t\nConditions:\n"
        "  Type\t\t\tStatus\tLastHeartbeatTime\t\t\tLastTransitionTime\t\t\tReason\t\t\tMessage\n"
        "  ----\t\t\t------\t-----------------\t\t\t------------------\t\t\t------\t\t\t-------\n"
        f"  Ready \t\t\t{ready} \t{_TS} \t{_TS} \tKubeletReady \t\t\tkubelet is posting ready\n"
        "Addresses:\t\t10.0.3.17,10.0.3.17\nNo events.\n"
    )


@pytest.mark.parametrize("events", [None, NORMAL_EVENT], ids=["no_events", "normal_event"])
@pytest.mark.parametrize("after", sorted(AFTER))
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failure_printed_after_a_healthy_describe_node_block_does_not_name_that_node(
    failure: str, after: str, events: str | None
) -> None:
    text = describe_node(events=events) + AFTER[after] + FAILURES[failure] + "\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.explanation


def test_an_older_kubectls_describe_block_ends_at_no_events() -> None:
    # kubectl 1.6 printed no "Unschedulable:", so its block never shows a node healthy
    # (hosts_health); where it ends is still where its "No events." is
    lines = (describe_node_1_6() + ECC + "\n").split("\n")
    [(first, end, node)] = describe_node_spans(lines)
    assert (first, node, lines[end - 1], lines[end]) == (0, H, "No events.", ECC)


@pytest.mark.parametrize("after", sorted(AFTER))
def test_a_failure_after_a_healthy_describe_block_names_the_host_its_own_line_names(
    after: str,
) -> None:
    line = f"Jun  3 10:00:01 gpu-node-9 kernel: {XID}\n"
    got = explain_text(describe_node(events=NORMAL_EVENT) + AFTER[after] + line)
    assert (got.category, got.node) == ("gpu_hardware", "gpu-node-9"), got.explanation


INSIDE = {
    "condition_row": describe_node(
        conditions=HEALTHY_CONDITIONS
        + _condition("SysLogsXIDError", "True", "SysLogsXIDErrorIsNotHealthy", _XID_MSG)
    ),
    "last_events_row": describe_node(events=NORMAL_EVENT + XID_EVENT),
    # describeNode writes no blank line; one a paste put before Events leaves them in the block
    "events_after_a_pasted_blank_line": describe_node(events=NORMAL_EVENT + XID_EVENT).replace(
        "\nEvents:", "\n\nEvents:"
    ),
}


@pytest.mark.parametrize("after", ["", "$ kubectl get pods\nNo resources found\n"])
@pytest.mark.parametrize("where", sorted(INSIDE))
def test_a_failure_inside_a_describe_node_block_still_names_its_node(
    where: str, after: str
) -> None:
    got = explain_text(INSIDE[where] + after)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", H), got.explanation


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize(
    "block",
    [
        describe_node(conditions=_condition("Ready", "Unknown", "NodeStatusUnknown", "stopped")),
        describe_node_1_6(ready="False"),
    ],
    ids=["ready_unknown", "kubectl_1_6_ready_false"],
)
def test_a_not_ready_describe_block_can_still_be_the_last_resort_for_a_failure_after_it(
    failure: str, block: str
) -> None:
    got = explain_text(block + FAILURES[failure] + "\n")
    assert (got.blame, got.node) == ("node", H), got.explanation


def test_a_describe_block_ends_after_its_events_section() -> None:
    lines = (describe_node(events=NORMAL_EVENT + XID_EVENT) + "$ kubectl logs x\n" + ECC).split(
        "\n"
    )
    [(first, end, node)] = describe_node_spans(lines)
    assert (first, node) == (0, H)
    assert lines[end - 1] == XID_EVENT.rstrip("\n")
    assert lines[end] == "$ kubectl logs x"


def test_a_describe_block_ends_at_events_none_and_at_the_next_nodes_name() -> None:
    two = describe_node() + "\n\n" + describe_node().replace(H, "gpu-node-4") + ECC
    spans = describe_node_spans(two.split("\n"))
    assert [node for _, _, node in spans] == [H, "gpu-node-4"]
    lines = two.split("\n")
    assert [lines[end - 1].split()[0] for _, end, _ in spans] == ["Events:", "Events:"]


_SEP = "-" * 15
UPTIME = " 10:00:01 up 3 days,  2:11,  0 users,  load average: 0.00, 0.01, 0.05\n"
FAN_OUT = {
    "clush_b": f"{_SEP}\ngpu-n07\n{_SEP}\n{UPTIME}",
    "ansible_rc": f"gpu-n07 | CHANGED | rc=0 >>\n{UPTIME}",
    "pssh_i": f"[1] 10:00:01 [SUCCESS] gpu-n07\n{UPTIME}",
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("tool", sorted(FAN_OUT))
def test_a_new_command_ends_a_fan_out_tools_last_block(tool: str, failure: str) -> None:
    text = FAN_OUT[tool] + "$ kubectl logs trainer-0\n" + FAILURES[failure] + "\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.explanation


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("tool", sorted(FAN_OUT))
def test_a_failure_in_a_fan_out_tools_last_block_still_names_its_host(
    tool: str, failure: str
) -> None:
    got = explain_text(FAN_OUT[tool] + FAILURES[failure] + "\n")
    assert (got.blame, got.node) == ("node", "gpu-n07"), got.explanation


# the other default prompts hosts_fields reads (zsh "%m%# ", fish "user@host dir> ", SUSE's
# bash "user@host:dir> " and root's "host:dir # "), with a command typed or, but for zsh's,
# bare as a paste shows them with the trailing space dropped
PROMPTS = {
    "suse": "alice@login01:~/run> kubectl logs trainer-0\n",
    "suse_bare": "alice@login01:~/run>\n",
    "suse_root": "login01:~ # kubectl logs trainer-0\n",
    "suse_root_bare": "login01:/root #\n",
    "fish": "alice@login01 ~/run> kubectl logs trainer-0\n",
    "fish_bare": "alice@login01 ~>\n",
    "zsh": "login01% kubectl logs trainer-0\n",
    "zsh_root": "login01# kubectl logs trainer-0\n",
}


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
@pytest.mark.parametrize("tool", sorted(FAN_OUT))
def test_a_suse_fish_or_zsh_prompt_ends_a_fan_out_tools_last_block(tool: str, prompt: str) -> None:
    got = explain_text(FAN_OUT[tool] + PROMPTS[prompt] + ECC + "\n")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.explanation


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
def test_a_prompt_after_a_failure_inside_a_block_leaves_the_failure_its_host(prompt: str) -> None:
    got = explain_text(FAN_OUT["clush_b"] + ECC + "\n" + PROMPTS[prompt])
    assert (got.blame, got.node) == ("node", "gpu-n07"), got.explanation


# ClusterShell's _close_common (lib/ClusterShell/CLI/Clush.py) prints the non-zero return codes
# and timeouts after the gathered blocks: "clush: %s: exited with exit code %d", "clush: %s:
# command timeout", a node set of several nodes followed by " (%d)"
CLUSH_CLOSE = {
    "exit_code": "clush: gpu-n07: exited with exit code 1\n",
    "several_nodes": "clush: gpu-n[07-08] (2): exited with exit code 255\n",
    "timeout": "clush: gpu-n08: command timeout\n",
}


@pytest.mark.parametrize("close", sorted(CLUSH_CLOSE))
def test_clushs_return_code_lines_end_its_last_block(close: str) -> None:
    got = explain_text(FAN_OUT["clush_b"] + CLUSH_CLOSE[close] + ECC + "\n")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.explanation


def test_a_failure_in_clushs_last_block_keeps_its_host_above_the_return_codes() -> None:
    got = explain_text(FAN_OUT["clush_b"] + ECC + "\n" + CLUSH_CLOSE["exit_code"])
    assert (got.blame, got.node) == ("node", "gpu-n07"), got.explanation
