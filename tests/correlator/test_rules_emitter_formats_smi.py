"""`nvidia-smi -q` health sections and nvidia-smi's lost-GPU lines against the explain rules.

Layout from a real H100's `nvidia-smi -q` (/work/shared/fixtures/real-h100/nvidia-smi-q.txt,
driver 580.159.04): the "==NVSMI LOG==" header, "GPU <domain:bus:dev.fn>" blocks, key and value
padded to column 55, sections by four-space indent: "ECC Errors / Volatile|Aggregate / SRAM
Correctable, SRAM Uncorrectable Parity, SRAM Uncorrectable SEC-DED, DRAM Correctable, DRAM
Uncorrectable", "Retired Pages / Single Bit ECC, Double Bit ECC, Pending Page Blacklist",
"Remapped Rows / Correctable Error, Uncorrectable Error, Pending, Remapping Failure Occurred";
the pre-Ampere layout ("Volatile / Single Bit|Double Bit / Device Memory ... Total") per
nvidia-smi(1). Counts zero read as healthy; non-zero as nvidia_smi.json and the gpu readers
document: volatile uncorrectable ECC, a pending retirement or remap, a remap failure and a lost GPU
are the GPU's (gpu_hardware / node); correctable counts and remaps already done are not faults.
"""

from __future__ import annotations

import pytest

from tests.correlator.emitter_probe import Fmt, check, params

_SRC = (
    "nvidia-smi -q (real H100, driver 580.159.04: /work/shared/fixtures/real-h100/nvidia-smi-q.txt)"
)
_OLD = "nvidia-smi(1) -q, pre-Ampere ECC Errors layout (Single Bit / Double Bit)"
GPU, NOTHING = ("gpu_hardware", "node"), (None, "unknown")
_PCI = ("00000000:00:06.0", "00000000:1B:00.0", "00000000:C1:00.0", "00000001:0A:00.0")
_PRODUCT = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H200", "NVIDIA L40S")
_W = 55  # nvidia-smi pads "key" to this column before ": value"


def _kv(depth: int, key: str, value: object) -> str:
    pad = "    " * depth + key
    return f"{pad:<{_W}}: {value}\n"


def _doc(body: str) -> str:
    """A -q document around one GPU's sections (header and the lines before them)."""
    return (
        "\n==============NVSMI LOG==============\n\n"
        + _kv(0, "Timestamp", "Sun Nov 22 11:59:35 2026")
        + _kv(0, "Driver Version", "{driver}")
        + _kv(0, "CUDA Version", "13.0")
        + "\n"
        + _kv(0, "Attached GPUs", 8)
        + "GPU {pci}\n"
        + _kv(1, "Product Name", "{product}")
        + body
    )


def _ecc(v: tuple[str, ...], a: tuple[str, ...]) -> str:
    keys = ("SRAM Correctable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED")
    keys += ("DRAM Correctable", "DRAM Uncorrectable")
    return (
        "    ECC Errors\n        Volatile\n"
        + "".join(_kv(3, k, x) for k, x in zip(keys, v, strict=True))
        + "        Aggregate\n"
        + "".join(_kv(3, k, x) for k, x in zip(keys, a, strict=True))
        + _kv(3, "SRAM Threshold Exceeded", "{threshold}")
    )


def _remap(corr: str, unc: str, pending: str, failure: str) -> str:
    return (
        "    Remapped Rows\n"
        + _kv(2, "Correctable Error", corr)
        + _kv(2, "Inactive Correctable Error", 0)
        + _kv(2, "Uncorrectable Error", unc)
        + _kv(2, "Inactive Uncorrectable Error", 0)
        + _kv(2, "Pending", pending)
        + _kv(2, "Remapping Failure Occurred", failure)
        + "        Bank Remap Availability Histogram\n"
        + _kv(3, "Max", "2560 bank(s)")
        + _kv(3, "High", "0 bank(s)")
    )


def _retired(sbe: str, dbe: str, key: str, pending: str) -> str:
    return (
        "    Retired Pages\n"
        + _kv(2, "Single Bit ECC", sbe)
        + _kv(2, "Double Bit ECC", dbe)
        + _kv(2, key, pending)
    )


_BASE = {"pci": _PCI, "product": _PRODUCT, "driver": ("580.159.04", "550.54.15", "535.129.03")}
_Z = ("0",) * 5


def _q(key: str, body: str, want: tuple[str | None, str], **values: tuple) -> Fmt:
    return Fmt(f"smi-q-{key}", _SRC, _doc(body), {**_BASE, "threshold": ("No",), **values}, want)


SMI_Q = [
    _q(
        "healthy",
        _ecc(_Z, _Z)
        + _retired("N/A", "N/A", "Pending Page Blacklist", "N/A")
        + _remap("0", "0", "No", "No"),
        NOTHING,
    ),
    _q(
        "volatile-dram-unc",
        _ecc(("0", "0", "0", "{c}", "{n}"), ("0", "0", "0", "{c}", "{n}"))
        + _remap("0", "0", "No", "No"),
        GPU,
        n=("1", "2", "17", "4096"),
        c=("0", "12"),
    ),
    _q(
        "volatile-sram-unc",
        _ecc(("{c}", "{n}", "0", "0", "0"), ("{c}", "{n}", "0", "0", "0")),
        GPU,
        n=("1", "3", "250"),
        c=("0", "5"),
    ),
    _q(
        "volatile-sram-secded",
        _ecc(("0", "0", "{n}", "0", "0"), ("0", "0", "{n}", "0", "0")),
        GPU,
        n=("1", "8"),
    ),
    _q(
        "correctable-only",
        _ecc(("{c}", "0", "0", "{c}", "0"), ("{c}", "0", "0", "{c}", "0"))
        + _remap("{c}", "0", "No", "No"),
        NOTHING,
        c=("1", "42", "65535"),
    ),
    _q("aggregate-only", _ecc(_Z, ("0", "{n}", "0", "0", "{n}")), NOTHING, n=("1", "6")),
    _q(
        "sram-threshold",
        _ecc(_Z, ("0", "{n}", "0", "0", "0")),
        GPU,
        n=("1", "6"),
        threshold=("Yes",),
    ),
    _q("remap-pending", _remap("{c}", "{n}", "Yes", "No"), GPU, c=("0", "3"), n=("1", "2", "0")),
    _q("remap-failure", _remap("{c}", "{n}", "No", "Yes"), GPU, c=("0", "3"), n=("1", "5", "512")),
    _q("remap-done", _remap("{c}", "{n}", "No", "No"), NOTHING, c=("0", "3"), n=("1", "2", "7")),
    _q(
        "retired-pending",
        _retired("{s}", "{d}", "{pkey}", "Yes"),
        GPU,
        s=("0", "2", "31"),
        d=("1", "0", "4"),
        pkey=("Pending Page Blacklist", "Pending Page Retirement"),
    ),
    _q(
        "retired-none-pending",
        _retired("{s}", "{d}", "Pending Page Blacklist", "No"),
        NOTHING,
        s=("0", "2"),
        d=("0", "1"),
    ),
]


def _old(tot: str, dev: str) -> str:
    def block(name: str, mem: str, total: str) -> str:
        return (
            f"            {name}\n"
            + _kv(4, "Device Memory", mem)
            + _kv(4, "Register File", 0)
            + _kv(4, "L1 Cache", 0)
            + _kv(4, "L2 Cache", 0)
            + _kv(4, "Texture Memory", "N/A")
            + _kv(4, "Total", total)
        )

    return (
        "    ECC Errors\n        Volatile\n"
        + block("Single Bit", "{sbe}", "{sbe}")
        + block("Double Bit", dev, tot)
    )


SMI_OLD = [
    Fmt(
        "smi-q-old-dbe",
        _OLD,
        _doc(_old("{n}", "{n}")),
        {**_BASE, "sbe": ("0", "4"), "n": ("1", "2", "9")},
        GPU,
    ),
    Fmt(
        "smi-q-old-sbe-only",
        _OLD,
        _doc(_old("0", "0")),
        {**_BASE, "sbe": ("1", "4", "300")},
        NOTHING,
    ),
]

# nvidia-smi's per-GPU failure lines (the NVML error strings after the handle)
SMI_LOST = [
    Fmt(
        "smi-no-handle",
        "nvidia-smi: 'Unable to determine the device handle for GPU%s: %s' (nvmlErrorString)",
        "Unable to determine the device handle for GPU{pci}: {err}\n",
        {
            "pci": _PCI,
            "err": ("Unknown Error", "GPU is lost.  Reboot the system to recover this GPU"),
        },
        GPU,
    ),
    Fmt(
        "smi-gpu-lost",
        "NVML_ERROR_GPU_IS_LOST's nvmlErrorString 'GPU is lost' as nvidia-smi -q prints a field",
        "GPU {pci}\n" + _kv(1, "Product Name", "{product}") + _kv(1, "{field}", "GPU is lost"),
        {
            "pci": _PCI,
            "product": _PRODUCT,
            "field": ("Fan Speed", "Performance State", "GPU Current Temp"),
        },
        GPU,
    ),
]

FORMATS = SMI_Q + SMI_OLD + SMI_LOST


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_an_nvidia_smi_health_section_reads_as_its_counts_say(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
