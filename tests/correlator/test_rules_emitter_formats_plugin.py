"""NVIDIA k8s-device-plugin health messages, alone and with what follows them, per Xid.

Formats from NVIDIA/k8s-device-plugin @ PLUGIN_COMMIT: internal/rm/health.go checkHealth's
klog lines ("XidCriticalError: Xid=%d on Device=%s; marking device as unhealthy.", "Marking device
%v as unhealthy: %v", "unable to get device handle from UUID: %v; marking it as unhealthy",
"Error waiting for event: %v; Marking all devices as unhealthy", "Failed to determine uuid for
event %v: %v; Marking all devices as unhealthy."), internal/plugin/server.go ListAndWatch's
"'%s' device marked unhealthy: %s", internal/plugin/factory.go's "Failed to initialize NVML:
%v." (go-nvml's Return prints nvmlErrorString, or its ERROR_* name when libnvidia-ml is not
loaded); the kubelet's "Allocate failed due to ..., which is unexpected" that follows. Device IDs
are GPU UUIDs, MIG UUIDs or the older "MIG-GPU-<uuid>/<gi>/<ci>". Behind klog's header.

Verdicts per device_plugin.json: an Xid line reads as NVIDIA's Xid catalog says
(correlator/rules/xid_catalog.json: 13/31/43 the application's, 48/64/79/95 the GPU's, 74 the
NVLink's, 45 a consequence); health.go ignores 13, 31, 43, 45, 68 and 109 unless
DP_ENABLE_HEALTHCHECKS names them, so those lines are rarer but real. A device marked unhealthy
with no Xid said is the GPU's; an NVML init failure the node's.
"""

from __future__ import annotations

import pytest

from correlator.rules.xid import xid_verdict
from tests.correlator.emitter_probe import Fmt, check, params

PLUGIN_COMMIT = "1b826acc6af3079d8923bac395c3124b8861a9a6"
_AT = f"@{PLUGIN_COMMIT[:10]}"
_HEALTH = f"NVIDIA/k8s-device-plugin internal/rm/health.go{_AT}"
_SERVER = f"NVIDIA/k8s-device-plugin internal/plugin/server.go{_AT}"
_FACTORY = f"NVIDIA/k8s-device-plugin internal/plugin/factory.go{_AT}"
GPU, NODE = ("gpu_hardware", "node"), ("node", "node")
_KLOG = (
    "I{md} {hms}.{us}       1 {file}:{line}] ",
    "{date}T{hms}.{us}Z I{md} {hms}.{us} 1 {file}:{line}] ",
    "",
)
_DEVICES = (
    "GPU-8f6f2c1e-3b7a-4c55-9e0d-1a2b3c4d5e6f",
    "GPU-0c9a1d55-77aa-2b3c-d4e5-f60718293a4b",
    "MIG-5ad8c6f2-0c1e-5c2b-9a47-3f0e6d1b2c3d",
    "MIG-GPU-8f6f2c1e-3b7a-4c55-9e0d-1a2b3c4d5e6f/1/0",
)
_RES = (
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-3g.40gb",
)
_CLOCK = {
    "md": ("0312", "1130"),
    "hms": ("08:14:02", "23:59:01"),
    "us": ("511234", "000017"),
    "date": ("2026-03-12",),
}
# Xids the plugin reports (its EventData): hardware ones and the application ones it skips by
# default; the expected reading is the catalog's own
XIDS = (13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119, 140)
_ALLOCATE = (
    "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices {res}, "
    "which is unexpected"
)


def _want(xid: int, reported: bool = False) -> tuple[str | None, str]:
    """The catalog's reading of `xid`; with the device reported unhealthy after a consequence
    Xid (45: cleanup after earlier errors the text lacks), the report is all there is."""
    v = xid_verdict(xid)
    if reported and not v.root_cause:
        return GPU
    return (v.category.value if v.category else None, v.blame.value)


def _klog(key: str, src: str, file: str, line: int, body: str, want: tuple, **values: tuple) -> Fmt:
    return Fmt(
        key,
        src,
        body + "\n",
        {"file": (file,), "line": (line,), **_CLOCK, "dev": _DEVICES, "res": _RES, **values},
        want,
        prefixes=_KLOG,
    )


XID = [
    _klog(
        f"xid-{x}",
        _HEALTH,
        "health.go",
        169,
        f"XidCriticalError: Xid={x} on Device={{dev}}; marking device as unhealthy.",
        _want(x),
    )
    for x in XIDS
] + [
    # the same event, then ListAndWatch reporting the device and the kubelet refusing a pod
    _klog(
        f"xid-then-unhealthy-{x}",
        f"{_HEALTH} + {_SERVER}",
        "health.go",
        169,
        f"XidCriticalError: Xid={x} on Device={{dev}}; marking device as unhealthy.\n"
        + "I{md} {hms}.{us}       1 server.go:279] '{res}' device marked unhealthy: {dev}\n"
        + "  Warning  UnexpectedAdmissionError  12s  kubelet  "
        + _ALLOCATE,
        _want(x, reported=True),
    )
    for x in XIDS
]

UNHEALTHY = [
    _klog(
        "marked-unhealthy", _SERVER, "server.go", 279, "'{res}' device marked unhealthy: {dev}", GPU
    ),
    _klog(
        "marking-device",
        _HEALTH,
        "health.go",
        109,
        "Marking device {dev} as unhealthy: {ret}",
        GPU,
        ret=("ERROR_NOT_SUPPORTED", "Not Supported", "ERROR_GPU_IS_LOST", "GPU is lost"),
    ),
    _klog(
        "no-handle",
        _HEALTH,
        "health.go",
        92,
        "unable to get device handle from UUID: {ret}; marking it as unhealthy",
        GPU,
        ret=("ERROR_GPU_IS_LOST", "GPU is lost", "ERROR_NOT_FOUND", "Unknown Error"),
    ),
    _klog(
        "event-wait",
        _HEALTH,
        "health.go",
        126,
        "Error waiting for event: {ret}; Marking all devices as unhealthy",
        GPU,
        ret=("ERROR_GPU_IS_LOST", "GPU is lost", "Unknown Error", "ERROR_UNKNOWN"),
    ),
]

NVML_INIT = [
    _klog(
        "nvml-init",
        _FACTORY,
        "factory.go",
        99,
        "Failed to initialize NVML: {ret}.",
        NODE,
        ret=(
            "ERROR_LIBRARY_NOT_FOUND",
            "ERROR_DRIVER_NOT_LOADED",
            "Driver Not Loaded",
            "could not load NVML library",
            "Driver/library version mismatch",
            "ERROR_LIB_RM_VERSION_MISMATCH",
            "Unknown Error",
            "ERROR_UNKNOWN",
        ),
    ),
    _klog(
        "nvml-init-health",
        _HEALTH,
        "main.go",
        310,
        "error starting plugins: failed to initialize NVML: {ret}",
        NODE,
        ret=("ERROR_LIBRARY_NOT_FOUND", "Driver Not Loaded", "ERROR_DRIVER_NOT_LOADED"),
    ),
]

FORMATS = XID + UNHEALTHY + NVML_INIT


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_device_plugin_line_reads_as_its_family_and_the_xid_catalog_document(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
