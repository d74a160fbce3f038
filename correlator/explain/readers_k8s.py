"""Reader for `kubectl describe pod` of the GPU operator's own node daemons: a container of one of
those pods that keeps failing is the node's GPU stack failing, whatever the line that says so.

`kubectl describe pod` prints, per pod (kubernetes/kubectl pkg/describe/describe.go
@eb8363330e83d2de75071767a752c1645e6cba9d, describePod, describeContainerBasicInfo,
describeContainerState and describeStatus): "Name:\t<pod>", "Node:\t<node>/<ip>",
"Controlled By:\t<Kind>/<name>", then "Init Containers:" and "Containers:", each container as
"  <name>:" with "    State:\tWaiting" / "      Reason:\t<reason>" (and, after a restart,
"    Last State:\tTerminated" with its own Reason and Exit Code, which this reader leaves alone).
The GPU operator names its daemonsets nvidia-driver-daemonset (init containers
k8s-driver-manager and the validators), nvidia-container-toolkit-daemonset,
nvidia-device-plugin-daemonset, nvidia-operator-validator, nvidia-dcgm(-exporter) and
nvidia-mig-manager (NVIDIA/gpu-operator assets/state-driver/0500_daemonset.yaml
@ff54ddaada07b3dd7e326b8ca5fc3a127d91ac8a, name: nvidia-driver-daemonset, initContainers
k8s-driver-manager; the other assets/state-*/ daemonsets likewise); the same names are the ones
correlator/rules/emitters/device_plugin.json's gpu_operator_pod_failing reads in `kubectl get
pods` rows, which the event this reader makes is written for.
"""

from __future__ import annotations

import re

from correlator.explain.hosts import clean_host
from correlator.explain.readers_gpu import ReadResult, _event
from timeline.models import EventKind

_OPERATOR_POD = re.compile(
    r"^nvidia-(?:driver|operator-validator|device-plugin|container-toolkit|cuda-validator|dcgm"
    r"|mig-manager|driver-validation|device-plugin-validator)[\w.-]*$"
)
_NAME = re.compile(r"^Name:\s+(?P<v>\S+)\s*$")
_NODE = re.compile(r"^Node:\s+(?P<v>[A-Za-z0-9][\w.-]*)(?:/\S*)?\s*$")
_OWNER = re.compile(r"^Controlled By:\s+\w+/(?P<v>\S+)\s*$")
_CONTAINER = re.compile(r"^ {1,2}(?P<v>[a-z0-9][\w.-]*):\s*$")  # a delivery may eat a space
_STATE = re.compile(r"^\s+(?P<which>State|Last State):\s+(?P<v>\w+)\s*$")
_REASON = re.compile(r"^\s+Reason:\s+(?P<v>\w+)\s*$")
# the waiting reasons that say a container keeps failing (the kubelet's CrashLoopBackOff while it
# backs off restarting it, RunContainerError / CreateContainerError when it cannot start); a
# last state Terminated with Reason Error is not read here (it may be one past failure)
_WAITING = frozenset({"CrashLoopBackOff", "RunContainerError", "CreateContainerError"})


class _Pod:
    """The describe block read so far: whose pod, on which node, in which container."""

    def __init__(self, name: str, line: str) -> None:
        self.name = name
        self.operator = bool(_OPERATOR_POD.match(name))
        self.node: str | None = None
        self.init = False
        self.container = ""
        self.state = ""
        # the lines the verdict rests on besides the reason: the name or owner that makes it an
        # operator pod, its node, the container and its state (quoted as evidence)
        self.read: dict[str, str] = {"why": line} if self.operator else {}


def _header(pod: _Pod, line: str) -> bool:
    """Reads a pod-level or container-level line into `pod`; True when it was one."""
    if m := _NODE.match(line):
        pod.node = clean_host(m.group("v"))
        pod.read["node"] = line
    elif m := _OWNER.match(line):
        if not pod.operator and _OPERATOR_POD.match(m.group("v")):
            pod.operator, pod.read["why"] = True, line
    elif line.rstrip() in ("Init Containers:", "Containers:"):
        pod.init, pod.container = line.startswith("Init"), ""
    elif m := _CONTAINER.match(line):
        pod.container, pod.state = m.group("v"), ""
        pod.read["container"] = line
    elif m := _STATE.match(line):
        pod.state = m.group("v")
        pod.read["state"] = line
    else:
        return False
    return True


def read_operator_pod(lines: list[str]) -> ReadResult:
    """`kubectl describe pod` of a GPU operator daemon pod with a container that keeps failing:
    one event naming the pod the way `kubectl get pods` would, on the block's `Node:` host."""
    out = ReadResult()
    pod: _Pod | None = None
    for i, line in enumerate(lines):
        if m := _NAME.match(line):
            pod = _Pod(m.group("v"), line)
            continue
        if pod is None or _header(pod, line) or not (pod.operator and pod.container):
            continue
        reason = _REASON.match(line)
        if reason and reason.group("v") in _WAITING and pod.state == "Waiting":
            status = f"{'Init:' if pod.init else ''}{reason.group('v')}"
            msg = f"{pod.name} {status} (container {pod.container})"
            read_by = [pod.read[k] for k in ("why", "node", "container", "state") if k in pod.read]
            out.events.append(
                _event(EventKind.OTHER, line, msg, node=pod.node, payload={"read_by": read_by})
            )
            out.claimed.add(i)
    return out
