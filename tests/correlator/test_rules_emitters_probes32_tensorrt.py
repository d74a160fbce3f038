"""Probe set thirty-two (TensorRT / TensorRT-LLM): builder and runtime errors, their CUDA failures.

Read from NVIDIA/TensorRT-LLM cpp/include/tensorrt_llm/common/cudaUtils.h @83ab45a50d (check():
"[TensorRT-LLM][ERROR] CUDA runtime error in %s: %s" with cudaGetErrorString's text),
tllmException.h @0c6a62a1d7 and assert.h @69f5a6e307 (TLLM_CHECK: "[TensorRT-LLM][ERROR] Assertion
failed: %s"), tllmException.cpp @9ef670dab4 (what() adds " (<file>:<line>)"), and NVIDIA/TensorRT
include/NvInferRuntimeBase.h @b43d99ef9c (ErrorCode, the number logged before TensorRT's text; the
Python logger's "[<date>-<time>] [TRT] [E] " prefix, the samples' "[E] [TRT] "). CUDA errors inside
follow the CUDA rules: out of memory is oom_gpu/job, an illegal address the job's, an uncorrectable
ECC error the node's GPU. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

TLLM = "NVIDIA/TensorRT-LLM {}@83ab45a50d"
TRT = "NVIDIA/TensorRT include/NvInferRuntimeBase.h@b43d99ef9c"
OOM = ("oom_gpu", "job")
JOB = ("user_code", "job")
NODE = ("node", "node")
# where TensorRT-LLM was built (TllmException's what() ends with __FILE__:__LINE__)
_SRC = {
    "src": (
        "/src/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:123",
        "/home/jenkins/agent/workspace/LLM/main/L0_PostMerge/tensorrt_llm/cpp/tensorrt_llm/"
        "runtime/bufferManager.cpp:44",
        "/app/tensorrt_llm/cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp:1502",
    )
}
# how the exception reaches the log: bare, through pybind11's RuntimeError, through the executor
_TLLM_PREFIXES = (
    "",
    "RuntimeError: ",
    "[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: ",
)
# TensorRT's own lines: the Python bindings' logger, trtexec's, and TensorRT-LLM's logger
_TRT_PREFIXES = (
    "[11/29/2026-10:00:01] [TRT] [E] ",
    "[11/29/2026-10:00:01] [E] [TRT] ",
    "[TensorRT-LLM][ERROR] ",
)

FORMATS = (
    Fmt(
        "tllm-cuda-oom",
        TLLM.format("cpp/include/tensorrt_llm/common/cudaUtils.h"),
        "[TensorRT-LLM][ERROR] CUDA runtime error in {call}: out of memory ({src})\n",
        {
            **_SRC,
            "call": (
                "::cudaMallocAsync(ptr, n, mCudaStream->get())",
                "cudaMalloc(&ptr, n)",
                "::cudaMemPoolCreate(&memPool, &poolProps)",
                "cudaStreamCreate(&mStream)",
            ),
        },
        OOM,
        prefixes=_TLLM_PREFIXES,
    ),
    Fmt(
        "tllm-cuda-illegal",
        TLLM.format("cpp/include/tensorrt_llm/common/cudaUtils.h"),
        "[TensorRT-LLM][ERROR] CUDA runtime error in {call}: {err} ({src})\n",
        {
            **_SRC,
            "call": ("cudaDeviceSynchronize()", "::cudaMemcpyAsync(dst, src, n, kind, stream)"),
            "err": (
                "an illegal memory access was encountered",
                "misaligned address",
                "the provided PTX was compiled with an unsupported toolchain.",
            ),
        },
        JOB,
        prefixes=_TLLM_PREFIXES,
    ),
    Fmt(
        "tllm-cuda-ecc",
        TLLM.format("cpp/include/tensorrt_llm/common/cudaUtils.h"),
        "[TensorRT-LLM][ERROR] CUDA runtime error in {call}: uncorrectable ECC error encountered "
        "({src})\n",
        {**_SRC, "call": ("cudaDeviceSynchronize()", "cudaStreamSynchronize(mStream)")},
        ("gpu_hardware", "node"),
    ),
    Fmt(
        "tllm-assertion",
        TLLM.format("cpp/include/tensorrt_llm/common/tllmException.h"),
        "[TensorRT-LLM][ERROR] Assertion failed: {what} ({src})\n",
        {
            **_SRC,
            "what": (
                "mpiSize == tp * pp",
                "Tensor 'input_ids' has invalid shape (3, 4096), expected (-1)",
                "Input length (8192) + max new tokens (1024) has reached max sequence length "
                "(4096).",
                "Number of tokens (9000) exceeds max_num_tokens (8192)",
            ),
        },
        JOB,
        prefixes=_TLLM_PREFIXES,
    ),
    Fmt(
        "trt-cuda-oom",
        TRT,
        "{code}: [{where}] Error Code {code}: {what}\n",
        {
            "code": (1, 2),
            "where": (
                "defaultAllocator.cpp::allocate::20",
                "virtualMemoryBuffer.cpp::resizePhysical::140",
                "executionContext.cpp::commonEmitDebugTensor::1855",
            ),
            "what": (
                "Cuda Runtime (out of memory)",
                "OutOfMemory (no further information)",
                "Cuda Driver (CUDA_ERROR_OUT_OF_MEMORY)",
            ),
        },
        OOM,
        prefixes=_TRT_PREFIXES,
    ),
    Fmt(
        "trt-requested-memory",
        TRT,
        "{code}: Requested amount of GPU memory ({n} bytes) could not be allocated. There may not "
        "be enough free memory for allocation to succeed.\n",
        {"code": (2, 1), "n": (17179869184, 1073741824, 536870912)},
        OOM,
        prefixes=_TRT_PREFIXES,
    ),
    Fmt(
        "trt-engine-incompatible",
        TRT,
        "6: The engine plan file is {what}, please rebuild.\n",
        {
            "what": (
                "not compatible with this version of TensorRT, expecting library version 10.3.0.26 "
                "got 10.1.0.27",
                "generated on an incompatible device, expecting compute 9.0 got compute 8.0",
                "not compatible with this version of TensorRT, expecting library version 9.2.0.5 "
                "got 9.3.0.1",
            )
        },
        JOB,
        prefixes=_TRT_PREFIXES,
    ),
    Fmt(
        "trt-other-error",
        TRT,
        "{code}: [{where}] Error Code {code}: {what}\n",
        {
            "code": (4, 1, 2),
            "where": ("network.cpp::validate::3478", "runner.cpp::executeMyelinGraph::682"),
            "what": (
                "Internal Error (Network has dynamic or shape inputs, but no optimization profile "
                "has been defined.)",
                "Myelin ([myelinGraphExecute] Called with error 700)",
                "Internal Error (Assertion engine->deserialize(start, size, allocator, runtime) "
                "failed. )",
            ),
        },
        JOB,
        prefixes=_TRT_PREFIXES,
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_tensorrt_error_reads_as_its_family_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize(
    ("call", "err", "want"),
    [
        ("cudaSetDevice(device)", "all CUDA-capable devices are busy or unavailable", NODE),
        (
            "cudaGetDeviceCount(&count)",
            "CUDA driver version is insufficient for CUDA runtime version",
            JOB,
        ),
        ("cudaStreamSynchronize(stream)", "unspecified launch failure", JOB),
    ],
)
def test_a_cuda_error_inside_tensorrt_llm_keeps_the_cuda_reading(
    call: str, err: str, want: tuple[str, str]
) -> None:
    text = (
        f"[TensorRT-LLM][ERROR] CUDA runtime error in {call}: {err} "
        "(/src/tensorrt_llm/cpp/tensorrt_llm/runtime/utils.cpp:41)\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == want, got.explanation


def test_a_nccl_error_tensorrt_llm_wraps_stays_nccls() -> None:
    text = (
        "[TensorRT-LLM][ERROR] Failed, NCCL error /src/cpp/tensorrt_llm/plugins/ncclPlugin/"
        "allreducePlugin.cpp:300 'unhandled system error (run with NCCL_DEBUG=INFO for details)'\n"
    )
    got = explain_text(text)
    assert got.category == "interconnect", got.explanation


@pytest.mark.parametrize(
    "line",
    [
        "[11/29/2026-10:00:01] [TRT] [W] Using an engine plan file across different models of "
        "devices is not recommended and is likely to affect performance or even cause errors.",
        "[TensorRT-LLM][WARNING] Device 0 peer access Device 1 is not available.",
        "[TensorRT-LLM][INFO] Loaded engine size: 12853 MiB",
        "[TRT-LLM] [W] Found pynvml==11.5.0 and cuda driver version 535.104. Please use "
        "pynvml>=11.5.0 and cuda driver>=526 to get accurate memory usage.",
        "[11/29/2026-10:00:01] [TRT] [I] [MemUsageChange] Init CUDA: CPU +2, GPU +0, now: CPU 20, "
        "GPU 411 (MiB)",
    ],
)
def test_an_informational_tensorrt_line_is_no_failure(line: str) -> None:
    assert explain_text(line + "\n").category is None
