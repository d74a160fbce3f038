"""The amdgpu kernel driver's GPU-failure reports against the explain rules (rocm.json).

Formats from torvalds/linux drivers/gpu/drm/amd/amdgpu: amdgpu_ras.c (uncorrectable error counts
per block, in the three forms the driver has printed them, the RAS event log's "{seq}" prefix,
and the ATHUB interrupt's fatal error), amdgpu_ras_eeprom.c (the retired-page table full) and
amdgpu_job.c (a ring timeout). Each is printed behind dev_info/dev_err's "amdgpu <pci>: amdgpu: "
(or the bare "<pci>: ") as dmesg and the journal show it. A correctable count ("no user action is
needed") and a ring timeout that soft recovered are not failures and are pinned as unread.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

_SRC = "torvalds/linux drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c (master)"
G_NODE = ("gpu_hardware", "node")
_PREFIXES = (
    "[ {up}] amdgpu {pci}: amdgpu: ",
    "Jan 12 08:14:03 gpu-a-07 kernel: amdgpu {pci}: amdgpu: ",
    "[ {up}] amdgpu {pci}: ",
)
_BASE = {"up": ("1358.996458", "76914.152141"), "pci": ("0000:c1:00.0", "0000:1b:00.0")}
_BLOCKS = ("umc", "gfx", "sdma", "xgmi_wafl", "mmhub")


def amd(key: str, template: str, want: tuple[str | None, str], **values: tuple[object, ...]) -> Fmt:
    """One amdgpu kernel format behind the driver's dev_* prefixes."""
    return Fmt(key, _SRC, template + "\n", {**_BASE, **values}, want, prefixes=_PREFIXES)


FORMATS = [
    amd("ras-ue", "{n} uncorrectable hardware errors detected in {b} block", G_NODE,
        n=(1, 3, 240), b=_BLOCKS),
    amd("ras-ue-new", "socket: {s}, die: {d}, {n} new uncorrectable hardware errors detected in "
        "{b} block", G_NODE, s=(0, 1), d=(0, 3), n=(1, 12), b=_BLOCKS),
    amd("ras-ue-event", "{{{q}}} socket: {s}, die: {d}, {n} uncorrectable hardware errors detected "
        "in total in {b} block", G_NODE, q=(1, 42), s=(0, 1), d=(0, 2), n=(2, 8), b=_BLOCKS),
    amd("athub", "{q}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!", G_NODE,
        q=("", "{1}", "{17}")),
    amd("bad-pages", "Saved bad pages({n}) reaches threshold value({t}).", G_NODE,
        n=(128, 1024), t=(128, 1000)),
    amd("ring-timeout", "ring {r} timeout, signaled seq={s}, emitted seq={e}",
        ("gpu_hardware", "unknown"), r=("gfx_0.0.0", "comp_1.0.1", "sdma0"), s=(1234, 88),
        e=(1236, 90)),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_an_amdgpu_failure_report_reads_as_rocm_json_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)


@pytest.mark.parametrize(
    "line",
    [
        "amdgpu 0000:c1:00.0: amdgpu: 7 correctable hardware errors detected in total in umc "
        "block, no user action is needed.",
        "amdgpu 0000:c1:00.0: amdgpu: socket: 0, die: 1, 0 uncorrectable hardware errors "
        "detected in total in umc block",
        "amdgpu 0000:c1:00.0: amdgpu: ring comp_1.0.0 timeout, but soft recovered",
    ],
)
def test_a_benign_amdgpu_report_is_not_read_as_a_fault(line: str) -> None:
    assert explain_text(f"[ 1358.996458] {line}\n").category is None
