"""Gloo's TCP transport errors as torch raises them, and the NVIDIA GPU operator's validators.

Gloo (pytorch/gloo @70dc360272dfc57e3617184c78ff9b06f8cd4757): gloo/common/error.h GLOO_ERROR_MSG
prefixes "[" __FILE__ ":" __LINE__ "] "; gloo/transport/tcp/pair.cc "Connection closed by peer
%s" and "Read error %s: %s" (newer releases append ". This is typically caused by a remote
worker ... GLHF! 🏖️"), "writev %s: %s", "Socket unexpectedly closed %s", "Socket closed %s",
"Read timeout %s" / "Write timeout %s", connectCallback's error.what(); tcp/error.cc SystemError
"%s: %s, remote=%s"; tcp/helpers.h TimeoutError("timed out connecting: " + what); address.cc
Address::str() "[addr]:port" (port printed from sin_port as stored); tcp/unbound_buffer.cc "Timed
out waiting %dms for recv/send operation to complete" and the context's "Application timeout
caused pair closure"; tcp/device.cc GLOO_ENFORCE "Unable to find address for: %s" (iface or
hostname) and "Unable to find address for %s; bind(2) for %s failed with: %s"; pair.cc
@583545a1da8ac880919fc6511284d6a29be782d5 line 799 "connect %s: %s". torch's
ProcessGroupGloo.cpp wraps connect errors as "Gloo connectFullMesh failed with %s"; the error
surfaces as RuntimeError (or DistBackendError), under torchrun's "[rankN]:" / "[defaultN]:".

Policy (corpus README): a Gloo socket error is interconnect/unknown and its culprit is the peer
it names; a timeout (Gloo recv timeout, pair read timeout) is nccl_timeout_unknown/unknown with
no culprit; no interface for Gloo reads as NCCL's nccl_no_interface (node/unknown).

GPU operator (NVIDIA/gpu-operator @a22dbf671f2e26f9a1e342f8eea28e196235e110,
cmd/nvidia-validator/main.go; logrus text lines 'time="..." level=... msg="..."'): the driver,
toolkit, plugin and cuda validations' errors ("error validating driver installation: %w",
"toolkit is not ready", "GPU resources are not discovered by the node", "gave up waiting for pod
%s to be available", "failed to find an executable 'nvidia-smi' on the host"), the nvidia-smi
output they relay (NVML's "Failed to initialize NVML: Driver/library version mismatch"), the
driver container's messages (NVIDIA/gpu-driver-container @06a208ca9747c82b1ba99b76ecdcf2469b0a0207
ubuntu22.04/nvidia-driver: "Could not unload NVIDIA driver kernel modules, driver is in use",
"Could not resolve Linux kernel version"), and the operator's pods failing in `kubectl get pods`
and in kubelet's BackOff events (kubelet kuberuntime_manager.go "Back-off restarting failed
container %s in pod %s"). Policy: the operator's own daemons failing are node/node.
"""

from __future__ import annotations

import errno
import os
from typing import Any, NamedTuple

import pytest

from correlator.explain import explain_text

GLOO = "pytorch/gloo gloo/transport/tcp/{f}@70dc360272dfc57e3617184c78ff9b06f8cd4757"
GLOO_OLD = "pytorch/gloo gloo/transport/tcp/pair.cc@583545a1da8ac880919fc6511284d6a29be782d5"
GPUOP = "NVIDIA/gpu-operator cmd/nvidia-validator/main.go@a22dbf671f2e26f9a1e342f8eea28e196235e110"
DRV = (
    "NVIDIA/gpu-driver-container ubuntu22.04/nvidia-driver@06a208ca9747c82b1ba99b76ecdcf2469b0a0207"
)
NET = ("interconnect", "unknown")
TIMEOUT = ("nccl_timeout_unknown", "unknown")
NODE = ("node", "node")


class Probe(NamedTuple):
    """One instantiated report: its text, the verdict the policy gives, the node it names."""

    source: str
    text: str
    want: tuple[str | None, str]
    node: str | None


# GLOO_ERROR_MSG's __FILE__ as the torch builds print it
_TREES = (
    "../third_party/gloo",
    "/pytorch/third_party/gloo",
    "/opt/conda/conda-bld/pytorch_1682343967769/work/third_party/gloo",
)
# torch's wrapping of the what(), with and without torchrun's rank prefix
_WRAP = (
    "RuntimeError: {e}",
    "[rank3]: RuntimeError: {e}",
    "torch.distributed.DistBackendError: {e}",
)
# (Address::str(), the host it names)
PEERS = (
    ("[10.0.0.7]:12345", "10.0.0.7"),
    ("[172.28.0.12]:43185", "172.28.0.12"),
    ("[192.168.1.20]:29517", "192.168.1.20"),
    ("[fd00:1:2::17]:40617", "fd00:1:2::17"),
    ("[10.1.3.122]:42916$3", "10.1.3.122"),
)
_SUFFIX = (
    "",
    ". This is typically caused by a remote worker crashing. Check the logs of the remote "
    "worker before reporting an error. GLHF! \U0001f3d6\ufe0f",
)
_READ_SUFFIX = (
    "",
    ". This is typically caused by a remote worker hanging or bugs in the application. Check "
    "the logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f",
)


def _err(*names: str) -> tuple[str, ...]:
    return tuple(os.strerror(getattr(errno, n)) for n in names)


def _gloo(key: str, src: str, f: str, bodies: list[str], want: tuple, peer: bool) -> list[Any]:
    """Each body behind GLOO_ERROR_MSG's prefix and torch's wrapping, the peers in turn."""
    out = []
    for i, body in enumerate(bodies):
        printed, host = PEERS[i % len(PEERS)]
        tree, wrap = _TREES[i % len(_TREES)], _WRAP[i % len(_WRAP)]
        err = f"[{tree}/gloo/transport/tcp/{f}:{(598, 535, 144, 812)[i % 4]}] "
        err += body.format(peer=printed)
        text = wrap.format(e=err) + "\n"
        probe = Probe(src.format(f=f), text, want, host if peer else None)
        out.append(pytest.param(probe, id=f"gloo-{key}-{i}"))
    return out


def gloo_errors() -> list[Any]:
    """The transport's errors: socket errors naming a peer, timeouts naming none."""
    closed = [f"Connection closed by peer {{peer}}{s}" for s in _SUFFIX for _ in range(3)]
    reads = [
        f"Read error {{peer}}: {e}{s}"
        for e in _err("ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH")
        for s in _READ_SUFFIX
    ]
    writes = [f"writev {{peer}}: {e}" for e in _err("EPIPE", "ECONNRESET", "ETIMEDOUT")]
    socks = ["Socket unexpectedly closed {peer}"] * 3 + ["Socket closed {peer}"] * 3
    system = [
        f"{pre}{call}: {e}, remote={{peer}}"
        for pre in ("", "timed out connecting: ")
        for call, e in zip(
            ("SO_ERROR", "read", "SO_ERROR"),
            _err("ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH"),
            strict=True,
        )
    ]
    short = ["short read: got 0 bytes while expecting to read 8 bytes, remote={peer}"] * 2
    old_connect = [
        f"connect {{peer}}: {e}"
        for e in _err("ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH")
    ]
    pair_timeouts = [f"{d} timeout {{peer}}" for d in ("Read", "Write") for _ in range(2)]
    return (
        _gloo("closed", GLOO, "pair.cc", closed, NET, True)
        + _gloo("read", GLOO, "pair.cc", reads, NET, True)
        + _gloo("writev", GLOO, "pair.cc", writes, NET, True)
        + _gloo("sock", GLOO, "pair.cc", socks, NET, True)
        + _gloo("system", GLOO, "pair.cc", system, NET, True)
        + _gloo("short", GLOO, "pair.cc", short, NET, True)
        + _gloo("connect", GLOO_OLD, "pair.cc", old_connect, NET, True)
        + _gloo("pair-timeout", GLOO, "pair.cc", pair_timeouts, TIMEOUT, False)
    )


def gloo_other() -> list[Any]:
    """Timeouts, connectFullMesh's wrapping, and device.cc's address lookup."""
    out: list[Any] = []
    for i, (ms, op) in enumerate(((1800000, "recv"), (30000, "send"), (600000, "recv"))):
        err = f"[{_TREES[i]}/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting {ms}ms "
        text = _WRAP[i].format(e=err + f"for {op} operation to complete") + "\n"
        out.append(pytest.param(Probe(GLOO, text, TIMEOUT, None), id=f"gloo-waiting-{i}"))
    for i in range(2):
        text = _WRAP[i].format(e="Application timeout caused pair closure") + "\n"
        out.append(pytest.param(Probe(GLOO, text, TIMEOUT, None), id=f"gloo-app-timeout-{i}"))
    for i, (printed, host) in enumerate(PEERS[:3]):
        inner = f"[{_TREES[i]}/gloo/transport/tcp/pair.cc:144] "
        mesh = [
            (f"{inner}SO_ERROR: {_err('ECONNREFUSED')[0]}, remote={printed}", NET, host),
            (
                f"{inner}timed out connecting: SO_ERROR: No route to host, remote={printed}",
                NET,
                host,
            ),
            (f"{inner}no error", NET, None),
        ]
        for j, (what, want, node) in enumerate(mesh):
            text = f"RuntimeError: Gloo connectFullMesh failed with {what}\n"
            out.append(pytest.param(Probe(GLOO, text, want, node), id=f"gloo-mesh-{i}-{j}"))
    # no address for the interface or host name: read as NCCL's "no socket interface found"
    device = [
        "ifa != nullptr. Unable to find address for: eth0",
        "ifa != nullptr. Unable to find address for: ib0",
        "rp != nullptr. Unable to find address for: gpu-node-07",
        "bind_rv == 0. Unable to find address for gpu-node-07; bind(2) for [10.0.0.7] failed "
        "with: Cannot assign requested address",
    ]
    for i, body in enumerate(device):
        err = f"[enforce fail at {_TREES[i % 3]}/gloo/transport/tcp/device.cc:84] {body}"
        text = _WRAP[i % 2].format(e=err) + "\n"
        src = GLOO.format(f="device.cc")
        out.append(pytest.param(Probe(src, text, ("node", "unknown"), None), id=f"gloo-dev-{i}"))
    return out


_STAMPS = ("2024-05-02T10:11:12Z", "2025-01-17T03:04:05Z")


def _logrus(level: str, msg: str, i: int) -> str:
    return f'time="{_STAMPS[i % 2]}" level={level} msg="{msg}"'


def _validator(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _driver_validation_logs() -> list[list[str]]:
    """The driver validation's init container logs: nvidia-smi failing, no driver found."""
    smi_fail = (
        "Failed to initialize NVML: Driver/library version mismatch",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.",
    )
    logs: list[list[str]] = []
    for i, smi in enumerate(smi_fail):
        logs.append(
            [
                _logrus("info", "version: 1f8d6fa6-amd64, commit: 1f8d6fa", i),
                _logrus("info", "Attempting to validate a pre-installed driver on the host", i),
                smi,
                _logrus(
                    "info",
                    f"No pre-installed driver detected on the host: exit status {(18, 9)[i]}",
                    i,
                ),
                _logrus("info", "Validating containerized driver installation", i),
                _logrus("info", "Attempting to validate a driver container installation", i),
                smi,
                _logrus("warning", "failed to validate the driver, retrying after 5 seconds\\n", i),
            ]
        )
    for i in range(2):
        logs.append(
            [
                _logrus("info", "Attempting to validate a pre-installed driver on the host", i),
                _logrus(
                    "info",
                    "No pre-installed driver detected on the host: failed to find "
                    "an executable 'nvidia-smi' on the host",
                    i,
                ),
                _logrus("info", "Validating containerized driver installation", i),
                _logrus(
                    "info",
                    "Driver is not pre-installed on the host and is managed by GPU "
                    "Operator. Checking driver container status.",
                    i,
                ),
                _logrus(
                    "info",
                    "Error: error validating driver installation: error checking "
                    "driver container status: exit status 1",
                    i,
                ),
            ]
        )
    return logs


def gpuop_validator_logs() -> list[Any]:
    """The validator's init containers' logs for each validation failing."""
    logs = _driver_validation_logs()
    for i in range(2):
        logs.append(
            [
                "toolkit is not ready",
                _logrus(
                    "info",
                    "Error: error validating toolkit installation: exec: "
                    '\\"nvidia-smi\\": executable file not found in $PATH',
                    i,
                ),
            ]
        )
    for i in range(2):
        logs.append(
            [
                _logrus("info", "GPU resources are not yet discovered by the node, retry: 1", i),
                _logrus("info", "GPU resources are not yet discovered by the node, retry: 2", i),
                _logrus(
                    "info",
                    "Error: error validating plugin installation: GPU resources are "
                    "not discovered by the node",
                    i,
                ),
            ]
        )
    for i in range(2):
        logs.append(
            [
                _logrus("info", "pod nvidia-cuda-validator-x7k2p is curently in Pending phase", i),
                _logrus(
                    "info",
                    "Error: error validating cuda workload: gave up waiting for pod "
                    "nvidia-cuda-validator-x7k2p to be available",
                    i,
                ),
            ]
        )
    logs.append(
        [_logrus("error", "driver is not ready: error validating driver: exit status 9", 0)]
    )
    return [
        pytest.param(Probe(GPUOP, _validator(ls), NODE, None), id=f"gpuop-log-{i}")
        for i, ls in enumerate(logs)
    ]


def gpuop_driver_container() -> list[Any]:
    """The driver daemonset's own messages."""
    lines = (
        "Stopping NVIDIA persistence daemon...\nUnloading NVIDIA driver kernel modules...\n"
        "nvidia_modeset       1306624  0\nnvidia_uvm           1892352  2\n"
        "Could not unload NVIDIA driver kernel modules, driver is in use",
        "Resolving Linux kernel version...\nCould not resolve Linux kernel version",
        "Installing NVIDIA driver kernel modules...\nERROR: Unable to load the kernel module "
        "'nvidia.ko'.  This happens most frequently when this kernel module was built against "
        "the wrong or improperly configured kernel sources",
    )
    return [
        pytest.param(Probe(DRV, t + "\n", NODE, None), id=f"gpuop-driver-{i}")
        for i, t in enumerate(lines)
    ]


_PODS = (
    "nvidia-operator-validator-d5c26",
    "nvidia-driver-daemonset-418.94.202508060022-0-hs6rw",
    "nvidia-container-toolkit-daemonset-bbgqn",
    "nvidia-device-plugin-daemonset-qd9sd",
    "nvidia-cuda-validator-wgs28",
    "nvidia-device-plugin-validator-whr6m",
)
_STATUS = ("Init:CrashLoopBackOff", "CrashLoopBackOff", "Init:Error", "Init:CrashLoopBackOff")
_CONTAINERS = ("driver-validation", "nvidia-driver-ctr", "toolkit-validation", "plugin-validation")


def gpuop_k8s() -> list[Any]:
    """The operator's pods failing in `kubectl get pods` (-o wide names the node) and events."""
    out: list[Any] = []
    for i, pod in enumerate(_PODS):
        status = _STATUS[i % len(_STATUS)]
        row = f"{pod:<52}   0/1     {status:<24}{5 + i} (2m18s ago)   25m"
        text = "NAME" + " " * 51 + "READY   STATUS                  RESTARTS        AGE\n" + row
        out.append(pytest.param(Probe(GPUOP, text + "\n", NODE, None), id=f"gpuop-pods-{i}"))
        node = ("gpu-node-3", "ip-10-0-1-17.ec2.internal", "dgx042")[i % 3]
        wide = f"{row}   10.244.{i}.5   {node}   <none>           <none>"
        head = (
            "NAME" + " " * 51 + "READY   STATUS                  RESTARTS        AGE   IP       "
            "     NODE         NOMINATED NODE   READINESS GATES\n"
        )
        out.append(pytest.param(Probe(GPUOP, head + wide + "\n", NODE, node), id=f"gpuop-wide-{i}"))
    for i, pod in enumerate(_PODS[:4]):
        c = _CONTAINERS[i]
        events = (
            f"  Warning  BackOff    3m (x50 over 13m)  kubelet  Back-off restarting failed "
            f"container {c} in pod {pod}_gpu-operator(6f1c9d3e-1b2a-4c5d-9e8f-0a1b2c3d4e5f)\n",
            f"{2 + i}m  Warning  BackOff  pod/{pod}  Back-off restarting failed container {c} in "
            f"pod {pod}_gpu-operator(6f1c9d3e-1b2a-4c5d-9e8f-0a1b2c3d4e5f)\n",
        )
        for j, text in enumerate(events):
            out.append(pytest.param(Probe(GPUOP, text, NODE, None), id=f"gpuop-event-{i}-{j}"))
    return out


@pytest.mark.parametrize("probe", gloo_errors() + gloo_other())
def test_a_gloo_error_reads_as_the_transport_documents(probe: Probe) -> None:
    got = explain_text(probe.text)
    assert (got.category, got.blame) == probe.want, (probe.source, probe.text, got.explanation)
    assert got.node == probe.node, (probe.source, probe.text, got.node, got.explanation)


@pytest.mark.parametrize("probe", gpuop_validator_logs() + gpuop_driver_container() + gpuop_k8s())
def test_a_gpu_operator_failure_is_the_nodes_gpu_stack(probe: Probe) -> None:
    got = explain_text(probe.text)
    assert (got.category, got.blame) == probe.want, (probe.source, probe.text, got.explanation)
    assert got.node == probe.node, (probe.source, probe.text, got.node, got.explanation)
