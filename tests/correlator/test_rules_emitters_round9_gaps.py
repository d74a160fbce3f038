"""Round nine's first-sight gaps, each rule written from its emitter's format string and tested
here with made-up values (never a corpus case): AMD's ROCm runtime and amdgpu driver GPU faults,
NCCL's verbs wrapper (misc/ibvwrap.cc), rdma-core's fatal async event texts as any verbs user
prints them, XLA's NCCL stub that found no libnccl, and TensorFlow's TF_CHECK_OK on a GPU call
that ran out of memory."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


@pytest.mark.parametrize(
    "reason",
    [
        "Page not present or supervisor privilege",
        "Write access to a read-only page",
        "Unknown",
    ],
)
def test_a_rocm_memory_access_fault_is_the_programs_own_access(reason: str) -> None:
    line = (
        "Memory access fault by GPU node-2 (Agent handle: 0x5581c0a1b2c0) on address "
        f"0x7f11d2a00000. Reason: {reason}."
    )
    assert _verdict(line + "\nAborted (core dumped)") == ("user_code", "job", None)


def test_an_amdgpu_page_fault_in_a_journal_is_the_jobs_on_the_host_that_logged_it() -> None:
    text = (
        "Mar 02 10:11:12 mi-node-04 kernel: amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault "
        "(src_id:0 ring:24 vmid:3 pasid:32771)\n"
        "Mar 02 10:11:12 mi-node-04 kernel: amdgpu 0000:c1:00.0: amdgpu:  Process python pid 4411 "
        "thread python pid 4411\n"
        "Mar 02 10:11:12 mi-node-04 kernel: amdgpu 0000:c1:00.0: amdgpu: "
        "VM_L2_PROTECTION_FAULT_STATUS:0x00301031"
    )
    assert _verdict(text) == ("user_code", "job", "mi-node-04")


def test_a_rocm_hardware_exception_reads_by_its_reason() -> None:
    ecc = "HW Exception by GPU node-1 (Agent handle: 0x55d1e0c0) reason :ECC error"
    hang = "HW Exception by GPU node-1 (Agent handle: 0x55d1e0c0) reason :GPU Hang"
    assert _verdict(ecc)[:2] == ("gpu_hardware", "node")
    assert _verdict(hang)[:2] == ("gpu_hardware", "unknown")


@pytest.mark.parametrize(
    "warn",
    [
        "misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq failed",  # v2.7.8
        "misc/ibvwrap.cc:114 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
        "misc/ibvwrap.cc:221 NCCL WARN Call to ibv_create_qp failed with error Invalid argument "
        "errno 22",  # 2.2x
    ],
)
def test_a_failed_verbs_call_is_the_rdma_device_of_the_host_that_logged_it(warn: str) -> None:
    text = (
        "gpu-b-02:3310:3391 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.9.0.2<0>\n"
        f"gpu-b-02:3310:3391 [0] {warn}"
    )
    assert _verdict(text) == ("interconnect", "infra", "gpu-b-02")


@pytest.mark.parametrize(
    "event",
    [
        "local work queue catastrophic error",
        "local catastrophic error",
        "local access violation work queue error",
    ],
)
def test_a_fatal_rdma_async_event_from_any_verbs_user_is_the_rdma_device(event: str) -> None:
    line = f"W0302 10:11:12.000001 4411 transfer.cpp:88] Received async event {event} for mlx5_3"
    assert _verdict(line)[:2] == ("interconnect", "infra")


def test_a_non_fatal_async_event_text_is_not_read_as_a_fatal_one() -> None:
    assert (
        explain_text("Received async event communication established for mlx5_3").category is None
    )


def test_xla_without_a_loadable_nccl_is_the_jobs_environment() -> None:
    line = (
        "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: NCCL operation "
        "ncclCommInitRank(&comm, nranks, id, rank) failed: Unable to load NCCL library. "
        "Multi-GPU collectives will not work."
    )
    assert _verdict(line) == ("user_code", "job", None)


def test_a_tensorflow_check_on_a_gpu_call_out_of_memory_is_gpu_memory() -> None:
    line = (
        "2025-03-02 10:11:12.000001: F tensorflow/core/kernels/segment_reduction_ops_gpu.cu.cc:96]"
        " Non-OK-status: GpuLaunchKernel(SortedSegmentReductionCustomKernel, config.block_count,"
        " config.thread_per_block, 0, d.stream()) status: Internal: out of memory"
    )
    assert _verdict(line)[:2] == ("oom_gpu", "job")


def test_a_tensorflow_check_that_failed_otherwise_is_not_gpu_memory() -> None:
    line = (
        "F tensorflow/core/kernels/conv_ops.cc:1120] Non-OK-status: stream->ThenConvolve(...) "
        "status: Internal: misaligned address"
    )
    assert _verdict(line)[0] != "oom_gpu"
