"""kubelet's eviction, admission, OOM and back-off messages, as kubectl prints them.

Formats (kubernetes/kubernetes, commits cited in kubelet.json): eviction/helpers.go's
evictionMessage ("The node was low on resource: %v. " + "Threshold quantity: %v, available: %v. "
+ per container "Container %s was using %s, request is %s, has larger consumption of %v. "),
lifecycle/predicate.go's InsufficientResourceError ("Node didn't have enough resource: %s,
requested: %d, used: %d, capacity: %d", reason "OutOf" + resource), the device manager's
"Allocate failed due to %v, which is unexpected" (reason UnexpectedAdmissionError; its errors from
cm/devicemanager/manager.go and a GPU-sharing allocator's scheduler-decision lookup; kubelet.go
rejectPod's pod status "Pod " + message beside spec.nodeName), the container status kubectl
describe prints for an OOM kill (Reason: OOMKilled, Exit Code: 137) and kuberuntime's back-off
("Back-off restarting failed container %s in pod %s", format.Pod's "name_namespace(uid)"). Each
behind the forms kubectl shows events in (describe's "Type Reason Age From Message" row, get
events' row) and filled with resource names (memory, ephemeral-storage, inodes, pids,
nvidia.com/gpu, MIG profiles), quantities in the forms resource.Quantity prints, and container/pod
names of several styles.
"""

from __future__ import annotations

import pytest

from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

_K8S = "kubernetes/kubernetes"
_EVICT = f"{_K8S} pkg/kubelet/eviction/helpers.go"
_PRED = f"{_K8S} pkg/kubelet/lifecycle/predicate.go"
_DM = f"{_K8S} pkg/kubelet/cm/devicemanager/manager.go"
_RUNTIME = f"{_K8S} pkg/kubelet/kuberuntime/kuberuntime_manager.go"
_REJECT = f"{_K8S} pkg/kubelet/kubelet.go rejectPod"
# a scheduler-decided GPU share looked up by the node's allocator (kubelet.json's sources: HAMi
# server.go's design; the vendor wording as reported in ray-project/kuberay issue 1414)
_SHARE = "Project-HAMi/HAMi pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go"
HOOM, NODE, SCHED = ("oom_host", "job"), ("node", "node"), ("scheduler", "infra")
USER = ("user_code", "job")
GPU_UNKNOWN, GPU_NODE = ("gpu_hardware", "unknown"), ("gpu_hardware", "node")

CONTAINERS = ("trainer", "pytorch", "worker-3", "main", "llm-serving-vllm", "c")
PODS = (
    "train-job-0_default(7c1b2e55-0d7a-4b8e-9f3a-1b2c3d4e5f60)",
    "llama3-70b-worker-2_ml-team(0f4c6a0e-5d3b-41f7-a2c9-77e1d0c8b9aa)",
    "pytorchjob-mnist-master-0_kubeflow(3a9d...)",
    "ray-head-x7k2p_ray(1e2f3a4b-0000-4c5d-8e9f-abcdefabcdef)",
)
# kubectl describe's event row (newer and older "kubelet, <node>" From), kubectl get events';
# kubectl 1.6-1.9's describe row, FirstSeen LastSeen Count From SubObjectPath Type Reason Message
# (pkg/kubectl/describe.go release-1.6: From is the EventSource printed with %v; 1.7-1.9
# pkg/printers/internalversion/describe.go: formatEventSource's "kubelet, <node>")
_EVENT = (
    "  Warning  {reason}  3m12s  kubelet  ",
    "  Warning  {reason}  41s (x7 over 5m2s)  kubelet, gpu-a-07  ",
    "12m         Warning   {reason}   pod/{name}   ",
    "  4m\t\t4m\t\t1\t{{kubelet gpu-a-07}}\tspec.containers{{trainer}}\tWarning\t\t{reason}\t\t",
    "  2m\t\t1m\t\t7\tkubelet, gpu-a-07\t\t\tWarning\t\t{reason}\t\t",
)
_UIDS = ("7c1b2e55-0d7a-4b8e-9f3a-1b2c3d4e5f60", "0f4c6a0e-5d3b-41f7-a2c9-77e1d0c8b9aa")
_LEADS = ("Pod ", "Pod was rejected: ")
_NAMES = ("train-job-0", "llama3-70b-worker-2", "pytorchjob-mnist-master-0")
_MEM = ("100Mi", "1Gi", "512Mi", "5%", "750000Ki")
_USED = ("30Gi", "15728640Ki", "1.5Gi", "2131921Ki", "64G")
_REQ = ("16Gi", "0", "8G", "500Mi", "1k")


def event(
    key: str, src: str, reason: str, body: str, want: tuple[str | None, str], **values: tuple
) -> Fmt:
    """A kubelet event `reason` whose message is `body`, as kubectl shows events."""
    return Fmt(
        key=key,
        source=src,
        template=body + "\n",
        values={"reason": (reason,), "name": _NAMES, **values},
        want=want,
        prefixes=_EVENT,
    )


def _evicted(key: str, resource: str, want: tuple[str | None, str]) -> Fmt:
    return event(
        key,
        _EVICT,
        "Evicted",
        "The node was low on resource: {res}. Threshold quantity: {th}, available: {av}. "
        "Container {c} was using {used}, request is {req}, has larger consumption of {res}. ",
        want,
        res=(resource,),
        th=_MEM,
        av=("51200Ki", "0", "98Mi", "1023Mi"),
        c=CONTAINERS,
        used=_USED,
        req=_REQ,
    )


EVICTION = [
    _evicted("evict-memory", "memory", HOOM),
    _evicted("evict-storage", "ephemeral-storage", NODE),
    _evicted("evict-inodes", "inodes", NODE),
    _evicted("evict-pids", "pids", NODE),
    # no container over its request (every pod below its request: only the node's message)
    event("evict-bare", _EVICT, "Evicted", "The node was low on resource: {res}. ", NODE,
          res=("ephemeral-storage", "inodes", "pids")),
    event("evict-bare-memory", _EVICT, "Evicted", "The node was low on resource: memory. "
          "Threshold quantity: {th}, available: {av}. ", HOOM, th=_MEM, av=("51200Ki", "12Mi")),
    event("evict-condition", _EVICT, "Evicted", "The node had condition: [{cond}]. ", NODE,
          cond=("DiskPressure",)),
]  # fmt: skip

_GPU_RES = ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "amd.com/gpu")
_OTHER = ("memory", "cpu", "ephemeral-storage", "hugepages-1Gi", "rdma/hca_shared_devices_a")
ADMISSION = [
    # predicate.go's reason is "OutOf" + the resource's name, so one entry per resource
    *(
        event(f"outof-{res}", _PRED, f"OutOf{res}", "Node didn't have enough resource: " + res
              + ", requested: {r}, used: {u}, capacity: {cap}", want, r=(1, 8, 2), u=(8, 0, 7),
              cap=(8, 7, 4))
        for res, want in [*((r, GPU_UNKNOWN) for r in _GPU_RES), *((r, SCHED) for r in _OTHER)]
    ),
    event("alloc-unavailable", _DM, "UnexpectedAdmissionError", "Allocate failed due to requested "
          "number of devices unavailable for {res}. Requested: {r}, Available: {a}, which is "
          "unexpected", GPU_UNKNOWN, res=_GPU_RES, r=(1, 8, 4), a=(0, 7, 3)),
    event("alloc-unhealthy", _DM, "UnexpectedAdmissionError", "Allocate failed due to no healthy "
          "devices present; cannot allocate unhealthy devices {res}, which is unexpected",
          GPU_NODE, res=_GPU_RES),
    event("alloc-rpc", _DM, "UnexpectedAdmissionError", "Allocate failed due to rpc error: code = "
          "{code} desc = {desc}, which is unexpected", NODE,
          code=("Unknown", "Unavailable", "DeadlineExceeded"),
          desc=("failed to allocate devices", "connection error: desc = \"transport: Error while "
                "dialing dial unix /var/lib/kubelet/device-plugins/nvidia-gpu.sock: connect: "
                "connection refused\"", "context deadline exceeded")),
    # the device manager's own failures to allocate on the node (manager.go): node/node
    event("alloc-unregistered", _DM, "UnexpectedAdmissionError", "Allocate failed due to cannot "
          "allocate unregistered device {res}, which is unexpected", NODE, res=_GPU_RES),
    event("alloc-unknown-plugin", _DM, "UnexpectedAdmissionError", "Allocate failed due to unknown "
          "Device Plugin {res}, which is unexpected", NODE, res=_GPU_RES),
    event("alloc-no-containers", _DM, "UnexpectedAdmissionError", "Allocate failed due to no "
          "containers return in allocation response &AllocateResponse{{ContainerResponses:[]"
          "*ContainerAllocateResponse{{}},}}, which is unexpected", NODE),
    event("alloc-less", _DM, "UnexpectedAdmissionError", "Allocate failed due to unexpectedly "
          "allocated less resources than required. Requested: {r}, Got: {g}, which is unexpected",
          NODE, r=(2, 8, 4), g=(1, 7, 0)),
    # a GPU-sharing allocator on the node not finding the scheduler's decision for a container
    event("alloc-scheduler-decision", _SHARE, "UnexpectedAdmissionError", "Allocate failed due to "
          "pod {uid} container {c} unable to find GPU device allocation by scheduler, which is "
          "unexpected", NODE, uid=_UIDS, c=CONTAINERS),
]  # fmt: skip

# kubelet.go rejectPod: the pod's status message is "Pod " + message ("Pod was rejected: " +
# message in newer kubelets), as `kubectl get pod -o yaml` folds it; spec.nodeName names the node
_STATUS = "spec:\n  nodeName: {node}\nstatus:\n  message: {lead}Allocate failed due to {body}"
STATUS = [
    Fmt("status-scheduler-decision", _REJECT, _STATUS + ", which is unexpected\n  phase: Failed\n"
        "  reason: UnexpectedAdmissionError\n", {"node": HOSTS, "lead": _LEADS, "body": tuple(
            f"pod {u} container\n    {c} unable to find GPU device allocation by scheduler"
            for u, c in zip(_UIDS * 3, CONTAINERS, strict=False))},
        NODE, culprit="node"),
    Fmt("status-unregistered", _REJECT, _STATUS + ", which\n    is unexpected\n  phase: Failed\n"
        "  reason: UnexpectedAdmissionError\n", {"node": HOSTS, "lead": _LEADS, "body": tuple(
            "cannot allocate unregistered device " + r for r in _GPU_RES)}, NODE, culprit="node"),
]  # fmt: skip

_DESCRIBE_STATUS = (
    "    State:          Running\n      Started:      Tue, 12 Mar 2026 08:20:11 +0000\n"
    "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n"
)
OOM = [
    Fmt("describe-oomkilled", _RUNTIME, "  {c}:\n" + _DESCRIBE_STATUS
        + "    Ready:          False\n    Restart Count:  {n}\n",
        {"c": CONTAINERS, "n": (1, 4, 17)}, HOOM),
    # kubectl get pod -o json: containerStatuses[].lastState.terminated
    Fmt("json-oomkilled", _RUNTIME, '"lastState": {{"terminated": {{"containerID": "containerd://'
        '{cid}", "exitCode": 137, "finishedAt": "2026-03-12T08:20:10Z", "reason": "OOMKilled", '
        '"startedAt": "2026-03-12T07:02:55Z"}}}}, "name": "{c}"\n',
        {"cid": ("4f1c9a", "e0d1b2c3d4"), "c": CONTAINERS}, HOOM),
]  # fmt: skip

BACKOFF = [
    event("backoff", _RUNTIME, "BackOff", "Back-off restarting failed container {c} in pod {pod}",
          USER, c=CONTAINERS, pod=PODS),
    # kuberuntime's error string in the kubelet's own log / pod status
    Fmt("backoff-err", _RUNTIME, 'E0312 08:21:02.511234    4711 pod_workers.go:1298] "Error '
        'syncing pod, skipping" err="failed to \\"StartContainer\\" for \\"{c}\\" with '
        'CrashLoopBackOff: \\"back-off {d} restarting failed container={c} pod={pod}\\"" '
        'pod="{ns}/{n}"\n', {"c": CONTAINERS, "d": ("10s", "2m40s", "5m0s"), "pod": PODS,
        "ns": ("default", "ml-team"), "n": _NAMES}, USER),
    Fmt("waiting", _RUNTIME, "    State:          Waiting\n      Reason:       CrashLoopBackOff\n"
        "    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    {code}\n",
        {"code": (1, 2, 255)}, USER),
]  # fmt: skip

FORMATS = EVICTION + ADMISSION + STATUS + OOM + BACKOFF


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_kubelet_message_reads_as_kubelet_json_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
