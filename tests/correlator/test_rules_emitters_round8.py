"""Round eight's emitter readings, each from its emitter's own format string filled in with
made-up values (never a corpus case): Gloo's pre-helpers pair.cc connect failure, a torch
elastic failure entry pasted onto one line, and the kernel's IOMMU DMA fault reports (AMD-Vi
IO_PAGE_FAULT, Intel VT-d DMAR)."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

GLOO = "/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc"


@pytest.mark.parametrize(
    "error", ["Connection refused", "No route to host", "Connection timed out"]
)
def test_a_gloo_pair_that_cannot_connect_names_the_peer_it_dialled(error: str) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        '    group = dist.new_group(ranks=[0, 1], backend="gloo")\n'
        f"RuntimeError: [{GLOO}:799] connect [10.40.2.17]:29517: {error}"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "10.40.2.17")


def test_a_gloo_connect_to_the_loopback_names_no_peer() -> None:
    got = explain_text(f"RuntimeError: [{GLOO}:799] connect [127.0.0.1]:29517: Connection refused")
    assert (got.category, got.node) == ("interconnect", None)


def test_gloo_connect_without_a_peer_is_not_read_as_the_peer_form() -> None:
    # pair.cc's own socket connect(2) failure ("connect: %s") names no peer
    got = explain_text(f"RuntimeError: [{GLOO}:271] connect: Connection refused")
    assert got.node is None


def test_a_flattened_elastic_failure_entry_names_its_host() -> None:
    line = (
        "Root Cause (first observed failure): [0]: time : 2025-03-02_10:11:12 "
        "host : trainer-b-04.cluster.local rank : 3 (local_rank: 3) exitcode : -9 (pid: 4411) "
        "error_file: <N/A> traceback : Signal 9 (SIGKILL) received by PID 4411"
    )
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == (
        "oom_host",
        "unknown",
        "trainer-b-04.cluster.local",
    )


def test_a_host_word_in_prose_is_not_a_flattened_elastic_entry() -> None:
    got = explain_text("the host : gpu-a-03 was fine, then RuntimeError: CUDA error: out of memory")
    assert got.node is None


@pytest.mark.parametrize(
    "line",
    [
        # amd_iommu_report_page_fault with a device (dev_err prefix) and the older device= form
        "Mar  2 10:11:12 gpu-a-07 kernel: nvidia 0000:41:00.0: AMD-Vi: Event logged "
        "[IO_PAGE_FAULT domain=0x000b address=0x3fe00040 flags=0x0020]",
        "Mar  2 10:11:12 gpu-a-07 kernel: AMD-Vi: Event logged [IO_PAGE_FAULT device=41:00.0 "
        "domain=0x000b address=0x000000003fe00040 flags=0x0020]",
        # dmar_fault_do_one, current and older wording
        "Mar  2 10:11:12 gpu-a-07 kernel: DMAR: [DMA Read NO_PASID] Request device [41:00.0] "
        "fault addr 0x3fe00000 [fault reason 0x06] PTE Read access is not set",
        "Mar  2 10:11:12 gpu-a-07 kernel: DMAR:[DMA Write] Request device [41:00.0] fault addr "
        "3fe00000 \nDMAR:[fault reason 05] PTE Write access is not set",
    ],
)
def test_an_iommu_dma_fault_blames_the_node_that_logged_it(line: str) -> None:
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-a-07")


def test_the_iommu_announcing_itself_is_not_a_fault() -> None:
    text = (
        "Mar  2 10:00:01 gpu-a-07 kernel: AMD-Vi: Interrupt remapping enabled\n"
        "Mar  2 10:00:01 gpu-a-07 kernel: DMAR: IOMMU enabled"
    )
    assert explain_text(text).category is None


def test_an_xid_outranks_the_iommu_fault_it_came_with() -> None:
    text = (
        "Mar  2 10:11:12 gpu-a-07 kernel: nvidia 0000:41:00.0: AMD-Vi: Event logged "
        "[IO_PAGE_FAULT domain=0x000b address=0x3fe00040 flags=0x0020]\n"
        "Mar  2 10:11:13 gpu-a-07 kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=2211, "
        "name=python, GPU has fallen off the bus."
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-a-07")
