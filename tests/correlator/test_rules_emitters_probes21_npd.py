"""Probe set twenty-one: Kubernetes node-problem-detector (NPD) problems as kubectl shows them.

Read from kubernetes/node-problem-detector @6632ca67148f: config/kernel-monitor.json,
readonly-monitor.json, docker-monitor.json, systemd-monitor(-counter).json,
kernel-monitor-counter.json and health-checker-*.json give each problem's reason, condition
type and the log line it quotes (pkg/systemlogmonitor/log_monitor.go generateMessage: the
matched lines themselves); pkg/util/helpers.go GenerateConditionChangeEvent writes
"Node condition %s is now: %s, reason: %s, message: %q"; cmd/healthchecker prints
"%v:%v was found unhealthy; repair flag : %v" and cmd/logcounter "Found %d matching logs,
which meets the threshold of %d"; pkg/exporters/k8sexporter/problemclient records events with
EventSource{Component: source, Host: nodeName} on the Node, which `kubectl describe node` shows
as "From: <source>, <node>" (kubernetes/kubectl pkg/describe/describe.go formatEventSource) and
`kubectl get events` as "node/<node>". Every problem is tried in each of those views and must
name the node. Never a corpus case.
"""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text

HOSTS = ("gpu-node-3", "ip-10-1-2-3.ec2.internal", "aks-gpu-12345678-vmss000002", "dgx-b200-07")
NODE = ("node", "node")
_TS = "Mon, 01 Jan 2024 10:00:00 +0000"

# temporary problems: (reason, source, the kernel/journal line NPD quotes, verdict)
EVENTS: tuple[tuple[str, str, str, tuple[str | None, str]], ...] = (
    (
        "TaskHung",
        "kernel-monitor",
        "INFO: task python3:12345 blocked for more than 120 seconds.",
        NODE,
    ),
    (
        "KernelOops",
        "kernel-monitor",
        "BUG: unable to handle kernel NULL pointer dereference at 0000000000000008",
        NODE,
    ),
    ("KernelOops", "kernel-monitor", "divide error: 0000 [#1] SMP", NODE),
    (
        "Ext4Error",
        "kernel-monitor",
        "EXT4-fs error (device nvme0n1p1): ext4_find_entry:1455: inode #2: comm kubelet: "
        "reading directory lblock 0",
        NODE,
    ),
    ("IOError", "kernel-monitor", "Buffer I/O error on device sdb1, logical block 0", NODE),
    (
        "UnregisterNetDevice",
        "kernel-monitor",
        "unregister_netdevice: waiting for eth0 to become free. Usage count = 1",
        NODE,
    ),
    (
        "CorruptDockerImage",
        "docker-monitor",
        "Error trying v2 registry: failed to register layer: rename "
        "/var/lib/docker/image/overlay2/layerdb/tmp/write-set-1 "
        "/var/lib/docker/image/overlay2/layerdb/sha256/ab12: directory not empty",
        NODE,
    ),
    (
        "OOMKilling",
        "kernel-monitor",
        "Killed process 4242 (python3) total-vm:123456kB, anon-rss:120000kB, file-rss:0kB, "
        "shmem-rss:0kB",
        ("oom_host", "job"),
    ),
)

# permanent problems: (condition type, reason, the message the condition carries, verdict)
CONDITIONS: tuple[tuple[str, str, str, tuple[str | None, str]], ...] = (
    ("KernelDeadlock", "DockerHung", "task docker:20744 blocked for more than 120 seconds.", NODE),
    (
        "ReadonlyFilesystem",
        "FilesystemIsReadOnly",
        "EXT4-fs (sda1): Remounting filesystem read-only",
        NODE,
    ),
    (
        "XfsShutdown",
        "XfsHasShutdown",
        "XFS (nvme0n1): Corruption of in-memory data detected.  Shutting down filesystem",
        NODE,
    ),
    (
        "CperHardwareErrorFatal",
        "CperHardwareErrorFatal",
        "{1}[Hardware Error]: event severity: fatal",
        NODE,
    ),
    (
        "CorruptDockerOverlay2",
        "CorruptDockerOverlay2",
        "returned error: readlink /var/lib/docker/overlay2/l/ABCDEF: invalid argument",
        NODE,
    ),
    (
        "KubeletUnhealthy",
        "KubeletUnhealthy",
        "kubelet:kubelet was found unhealthy; repair flag : true",
        NODE,
    ),
    (
        "ContainerRuntimeUnhealthy",
        "ContainerdUnhealthy",
        "cri:containerd was found unhealthy; repair flag : true",
        NODE,
    ),
    (
        "FrequentKubeletRestart",
        "FrequentKubeletRestart",
        "Found 5 matching logs, which meets the threshold of 5",
        NODE,
    ),
    (
        "FrequentContainerdRestart",
        "FrequentContainerdRestart",
        "Found 7 matching logs, which meets the threshold of 5",
        NODE,
    ),
    (
        "FrequentUnregisterNetDevice",
        "UnregisterNetDevice",
        "Found 3 matching logs, which meets the threshold of 3",
        NODE,
    ),
)


def _describe(host: str, conditions: str, events: str) -> str:
    return (
        f"Name:               {host}\n"
        "Roles:              <none>\n"
        "Labels:             nvidia.com/gpu.present=true\n"
        f"CreationTimestamp:  {_TS}\n"
        "Taints:             <none>\n"
        "Unschedulable:      false\n"
        "Conditions:\n"
        "  Type                 Status  LastHeartbeatTime                 LastTransitionTime"
        "                Reason                       Message\n"
        "  ----                 ------  -----------------                 ------------------"
        "                ------                       -------\n"
        f"{conditions}"
        f"  Ready                True    {_TS}   {_TS}   KubeletReady                 "
        "kubelet is posting ready status\n"
        "Events:\n"
        "  Type     Reason      Age   From                         Message\n"
        "  ----     ------      ----  ----                         -------\n"
        f"{events}"
    )


def _condition_row(ctype: str, status: str, reason: str, message: str) -> str:
    return f"  {ctype:<20} {status:<7} {_TS}   {_TS}   {reason:<28} {message}\n"


def _event_views(host: str, reason: str, source: str, message: str) -> dict[str, str]:
    obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "involvedObject": {"kind": "Node", "name": host, "uid": host},
        "reason": reason,
        "message": message,
        "source": {"component": source, "host": host},
        "type": "Warning",
        "count": 1,
    }
    return {
        "describe": _describe(
            host, "", f"  Warning  {reason}  5m    {source}, {host}   {message}\n"
        ),
        "get_events": (
            "LAST SEEN   TYPE      REASON       OBJECT            MESSAGE\n"
            f"2m          Warning   {reason}   node/{host}   {message}\n"
        ),
        "json": json.dumps(obj) + "\n",
    }


def _event_params() -> list[object]:
    out = []
    for n, (reason, source, message, want) in enumerate(EVENTS):
        host = HOSTS[n % len(HOSTS)]
        for view, text in _event_views(host, reason, source, message).items():
            out.append(pytest.param(text, want, host, id=f"{reason}-{n}-{view}"))
    return out


def _condition_params() -> list[object]:
    out = []
    for n, (ctype, reason, message, want) in enumerate(CONDITIONS):
        host = HOSTS[n % len(HOSTS)]
        change = f"Node condition {ctype} is now: True, reason: {reason}, message: {message!r}"
        change = change.replace("'", '"')  # Go's %q
        views = {
            "describe": _describe(host, _condition_row(ctype, "True", reason, message), ""),
            **{
                f"change_{k}": v
                for k, v in _event_views(host, reason, "kernel-monitor", change).items()
            },
        }
        for view, text in views.items():
            out.append(pytest.param(text, want, host, id=f"{ctype}-{view}"))
    return out


@pytest.mark.parametrize(("text", "want", "node"), _event_params())
def test_an_npd_problem_event_reads_as_its_log_line_means_on_the_node_it_is_recorded_on(
    text: str, want: tuple[str, str], node: str
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, node), (text, got.explanation)


@pytest.mark.parametrize(("text", "want", "node"), _condition_params())
def test_an_npd_problem_condition_set_true_blames_the_node_it_is_on(
    text: str, want: tuple[str, str], node: str
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, node), (text, got.explanation)


# NPD's default (healthy) conditions from its configs, the change events back to them, the
# systemd monitor's start events, and corrected memory errors (kernel-monitor's MemoryReadError
# "CE memory read error", CperHardwareErrorCorrected): nothing failed
_HEALTHY_CONDITIONS = (
    ("KernelDeadlock", "KernelHasNoDeadlock", "kernel has no deadlock"),
    ("ReadonlyFilesystem", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
    ("XfsShutdown", "XfsHasNotShutDown", "XFS has not shutdown"),
    ("CperHardwareErrorFatal", "CperHardwareHasNoFatalError", "UEFI CPER has no fatal error"),
    ("KubeletUnhealthy", "KubeletIsHealthy", "kubelet on the node is functioning properly"),
    (
        "ContainerRuntimeUnhealthy",
        "ContainerRuntimeIsHealthy",
        "Container runtime on the node is functioning properly",
    ),
    ("FrequentKubeletRestart", "NoFrequentKubeletRestart", "kubelet is functioning properly"),
    (
        "FrequentUnregisterNetDevice",
        "NoFrequentUnregisterNetDevice",
        "node is functioning properly",
    ),
    ("CorruptDockerOverlay2", "NoCorruptDockerOverlay2", "docker overlay2 is functioning properly"),
)


def _healthy_texts() -> list[object]:
    rows = "".join(_condition_row(t, "False", r, m) for t, r, m in _HEALTHY_CONDITIONS)
    out: list[object] = [pytest.param(_describe(HOSTS[0], rows, ""), id="describe-all-false")]
    for t, r, m in _HEALTHY_CONDITIONS:
        change = f'Node condition {t} is now: False, reason: {r}, message: "{m}"'
        views = _event_views(HOSTS[1], r, "kernel-monitor", change)
        out += [pytest.param(v, id=f"{t}-back-{k}") for k, v in views.items()]
    for reason, message in (
        ("KubeletStart", "Started Kubernetes kubelet."),
        ("ContainerdStart", "Starting containerd container runtime..."),
        (
            "MemoryReadError",
            "CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 "
            "page:0x12345 offset:0x0 grain:32 syndrome:0x0 - area:DRAM err_code:0001:0090)",
        ),
        ("CperHardwareErrorCorrected", "{1}[Hardware Error]: event severity: corrected"),
    ):
        views = _event_views(HOSTS[2], reason, "systemd-monitor", message)
        out += [pytest.param(v, id=f"{reason}-{k}") for k, v in views.items()]
    return out


@pytest.mark.parametrize("text", _healthy_texts())
def test_npd_healthy_conditions_and_notices_never_blame_the_node(text: str) -> None:
    got = explain_text(text)
    assert got.blame != "node", (text, got.explanation)
    assert got.category is None, (text, got.explanation)
