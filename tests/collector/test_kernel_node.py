"""Kernel messages about the host itself (collector/parse/kernel_node.py), each in its printk
format: lockups, hung tasks, panics, machine checks, EDAC, I/O and filesystem errors, NFS, and
the IOMMU blocking a device's DMA."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.parse.kernel import parse_kernel_line, parse_kernel_text
from timeline.models import EventKind


def test_real_soft_lockup_in_a_journal_is_a_host_fault_of_that_host() -> None:
    text = (
        Path(__file__).parent.parent / "fixtures" / "corpus" / "194_journal-soft-lockup-wendy.txt"
    )
    events = parse_kernel_text(text.read_text("utf-8"), year=2024)
    faults = [e for e in events if e.payload.get("fault") == "soft_lockup"]
    assert faults and all(e.kind is EventKind.OTHER and e.node == "wendy" for e in faults)


@pytest.mark.parametrize(
    ("message", "fault"),
    [
        # printk formats from kernel/hung_task.c, arch/x86/kernel/cpu/mce/core.c, drivers/edac,
        # block/blk-core.c, fs/ext4/super.c, fs/nfs/client.c, kernel/panic.c
        ("INFO: task python:4242 blocked for more than 120 seconds.", "hung_task"),
        ("mce: [Hardware Error]: Machine check events logged", "machine_check"),
        ("EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0", "edac_ue"),
        ("blk_update_request: I/O error, dev nvme0n1, sector 2048 op 0x1:(WRITE)", "io_error"),
        ("EXT4-fs error (device sda1): ext4_find_entry:1455: inode #2: comm ls", "fs_error"),
        ("nfs: server storage01 not responding, still trying", "nfs_down"),
        ("Kernel panic - not syncing: Fatal hardware error!", "panic"),
        # drivers/iommu/amd/iommu.c, drivers/iommu/intel/dmar.c
        (
            "nvidia 0000:41:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000b "
            "address=0x3fe00040 flags=0x0020]",
            "iommu_fault",
        ),
        (
            "DMAR: [DMA Write NO_PASID] Request device [41:00.0] fault addr 0x3fe00000 "
            "[fault reason 0x05] PTE Write access is not set",
            "iommu_fault",
        ),
    ],
)
def test_host_fault_messages_are_recognised_with_their_text(message: str, fault: str) -> None:
    ev = parse_kernel_line(f"[ 812.1] {message}", boot_ts=1_000.0)
    assert ev is not None and ev.kind is EventKind.OTHER
    assert ev.payload["fault"] == fault and ev.payload["text"] == message


def test_the_iommu_announcing_itself_is_not_a_host_fault() -> None:
    for message in ("DMAR: IOMMU enabled", "AMD-Vi: Interrupt remapping enabled"):
        assert parse_kernel_line(f"[ 0.41] {message}", boot_ts=1_000.0) is None
