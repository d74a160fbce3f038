"""Probes of the NVIDIA kernel driver's load and init failures, from the driver's own formats.

- NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv.c @30e15d79de62e8955eb8b77a6e292ab9b87f52b0
  (nvidia_init_module: "NVRM: No NVIDIA GPU found.", "NVRM: The NVIDIA probe routine was not
  called for %d device(s).", "NVRM: No NVIDIA devices probed.", "NVRM: The NVIDIA probe routine
  failed for %d device(s).", "NVRM: None of the NVIDIA devices were initialized."; nv_start_device:
  NV_DEV_PRINTF "No interrupts of any type are available. Cannot use this GPU.");
- the same repository's src/nvidia/arch/nvalloc/unix/src/osinit.c
  @448d5cc65624d3aa69015efa0d3fb50fd9729f41 (RmInitAdapter: "GPU does not have the necessary power
  cables connected." then "RmInitAdapter failed! (0x%x:0x%x:%d)"); NV_DEV_PRINTF's prefix is
  "NVRM: GPU %04x:%02x:%02x.%x: ";
- kmod-project/kmod tools/modprobe.c @b87d01d6ef87e7f717ed8a9221baeee3c60b571d (insmod_insert:
  "could not insert '%s': %s" with strerror(-err), behind "modprobe: ERROR: ").
Each is a node whose GPUs the driver cannot use: node/node, or gpu_hardware/node for a GPU short
of power; the host is the one whose kernel log it is.
"""

from __future__ import annotations

import errno
import os

import pytest

from correlator.explain import explain_text

_PCI = ("0000:3b:00.0", "0000:c1:00.0", "0009:01:00.0")
_KERNEL = (
    "[   12.345678] {line}",
    "Mar  1 10:00:05 {host} kernel: {line}",
    "2025-03-01T10:00:05.123456+00:00 {host} kernel: [   12.345678] {line}",
)
_HOSTS = ("gpu-node-07", "dgx042", "ip-10-1-23-5")


def _dev(fmt: str) -> list[str]:
    return [f"NVRM: GPU {pci}: {fmt}" for pci in _PCI]


_DRIVER_CANNOT_USE = [
    "NVRM: No NVIDIA GPU found.",
    "NVRM: No NVIDIA devices probed.",
    *(f"NVRM: The NVIDIA probe routine was not called for {n} device(s)." for n in (1, 8)),
    *(f"NVRM: The NVIDIA probe routine failed for {n} device(s)." for n in (1, 4)),
    "NVRM: None of the NVIDIA devices were initialized.",
    *_dev("No interrupts of any type are available. Cannot use this GPU."),
    *(
        f"modprobe: ERROR: could not insert '{mod}': {os.strerror(e)}"
        for mod in ("nvidia", "nvidia_uvm", "nvidia_peermem")
        for e in (errno.ENODEV, errno.EPERM, errno.EIO, errno.ENOEXEC)
    ),
]
_POWER = [
    f"{line}\nNVRM: GPU {pci}: RmInitAdapter failed! (0x24:0x1c:1603)"
    for pci, line in zip(
        _PCI, _dev("GPU does not have the necessary power cables connected."), strict=True
    )
]


def _cases(lines: list[str]) -> list[tuple[str, str, str]]:
    """Each line under each kernel prefix, each prefix with a host in turn."""
    return [
        (line, prefix, _HOSTS[i % len(_HOSTS)])
        for i, (line, prefix) in enumerate((ln, p) for ln in lines for p in _KERNEL)
    ]


def _text(line: str, prefix: str, host: str) -> str:
    return "".join(prefix.format(line=part, host=host) + "\n" for part in line.split("\n"))


@pytest.mark.parametrize(("line", "prefix", "host"), _cases(_DRIVER_CANNOT_USE))
def test_a_driver_that_cannot_use_the_nodes_gpus_is_the_nodes_fault(
    line: str, prefix: str, host: str
) -> None:
    got = explain_text(_text(line, prefix, host))
    assert (got.category, got.blame) == ("node", "node"), line
    assert got.node == (host if "{host}" in prefix else None)


@pytest.mark.parametrize(("line", "prefix", "host"), _cases(_POWER))
def test_a_gpu_short_of_power_is_the_nodes_hardware(line: str, prefix: str, host: str) -> None:
    got = explain_text(_text(line, prefix, host))
    assert (got.category, got.blame) == ("gpu_hardware", "node"), line
    assert "power" in got.explanation
    assert got.node == (host if "{host}" in prefix else None)


@pytest.mark.parametrize(
    "line",
    [
        "modprobe: ERROR: could not insert 'nvme': No such device",
        "modprobe: ERROR: could not insert 'snd_hda_intel': Operation not permitted",
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
        "nvidia: module verification failed: signature and/or required key missing - tainting",
    ],
)
def test_another_modules_failure_or_a_normal_load_is_no_gpu_fault(line: str) -> None:
    got = explain_text(_text(line, _KERNEL[1], "gpu-node-07"))
    assert got.category is None and got.blame == "unknown", line
