"""Recognizers for GPU and node faults that show up in job output rather than the kernel log:
nvidia-smi losing a GPU's handle, NVML/driver "reset required" errors, Kubernetes evictions for
memory pressure (kubectl describe / get events text pasted into or printed by a job)."""

from __future__ import annotations

import re
from typing import Any

from collector.parse.joblog_rules import JobMatch
from timeline.models import EventKind, Severity

# nvidia-smi: "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error" (no space
# after "GPU" on some driver versions) and "...: GPU is lost. Reboot the system to recover ...".
_NO_HANDLE = re.compile(
    r"Unable to (?:determine|detect) the device handle for (?:GPU|gpu)\s*"
    r"(?P<pci>[0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\s*:\s*"
    r"(?P<why>[^\"*`]+)"
)
# pynvml's exception, or slurmstepd's "error: NVML: Failed to get usage(15): GPU is lost".
_LOST = re.compile(
    r"\bNVMLError_GpuIsLost\b|\bNVML_ERROR_GPU_IS_LOST\b|\bNVML: .{0,80}\bGPU is lost"
)
_RESET = re.compile(
    r"\b(?P<name>NV_ERR_RESET_REQUIRED|NVML_ERROR_RESET_REQUIRED|NVMLError_ResetRequired)\b"
)
_PCI = re.compile(r"\b(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b")
_EVICTED = re.compile(r"The node was low on resource: (?P<res>[\w./-]+?)\.?(?:\s|$)")
_OVER_REQUEST = re.compile(
    r"Container (?P<container>\S+) was using (?P<usage>\S+), which exceeds its request of "
    r"(?P<request>[\w.]*\w)"
)


def _no_handle(line: str) -> JobMatch | None:
    m = _NO_HANDLE.search(line)
    if not m:
        return None
    why = m["why"].strip().rstrip(".")
    p: dict[str, Any] = {"tool": "nvidia-smi", "reason": why}
    if "GPU is lost" in why:
        p["gpu_is_lost"] = True
    msg = f"nvidia-smi cannot get a handle for GPU {m['pci']}: {why}"
    return JobMatch(EventKind.GPU_LOST, msg, None, Severity.CRITICAL, p, pci_bus_id=m["pci"])


def _reset_required(line: str) -> JobMatch | None:
    # An NVRM line is the driver's, which the node's kernel-log source reports: one event per
    # fact, as with Xid lines.
    if "NVRM:" in line:
        return None
    m = _RESET.search(line)
    if not m:
        return None
    pci = _PCI.search(line)
    p: dict[str, Any] = {"reset_required": True, "error": m["name"]}
    return JobMatch(
        EventKind.GPU_LOST,
        f"the GPU needs a reset ({m['name']})",
        None,
        Severity.CRITICAL,
        p,
        pci_bus_id=pci["pci"] if pci else None,
    )


def _evicted(line: str) -> JobMatch | None:
    m = _EVICTED.search(line)
    if not m or m["res"] != "memory":
        return None  # disk/pid pressure evictions are not an OOM
    p: dict[str, Any] = {"evicted": True, "resource": "memory", "stage": "kubelet"}
    if over := _OVER_REQUEST.search(line):
        p.update(container=over["container"], usage=over["usage"], request=over["request"])
    return JobMatch(
        EventKind.HOST_OOM, "pod evicted: the node was low on memory", None, Severity.ERROR, p
    )


def gpu_fault(line: str) -> JobMatch | None:
    """nvidia-smi lost handles, GPU-is-lost / reset-required errors, memory-pressure evictions."""
    if m := _no_handle(line):
        return m
    if _LOST.search(line):
        p: dict[str, Any] = {"gpu_is_lost": True}
        if "slurmstepd" in line:
            p["stage"] = "slurmstepd"
        return JobMatch(EventKind.GPU_LOST, "NVML: GPU is lost", None, Severity.CRITICAL, p)
    return _reset_required(line) or _evicted(line)
