"""JAX / XLA on GPU: XLA's allocator OOM and the CUDA and NCCL statuses an XlaRuntimeError
carries (probe set eight, the coordination-service half in test_rules_emitter_formats_jax.py).

Formats, from their sources:
- openxla/xla xla/stream_executor/integrations/tf_allocator_adapter.cc @370cfa8d30
  MemoryAllocationError: RESOURCE_EXHAUSTED "Out of memory while trying to allocate %d bytes." and
  "Out of host memory while trying to allocate %d bytes. Please set the environment variable
  XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB to allocate larger host memory than the default 64 GB.".
- openxla/xla xla/stream_executor/cuda/cuda_status.cc ToStatusSlow (commit not pinned: the stored
  copy's): "CUDA error: %s: %s: %s" (detail, cuGetErrorName, cuGetErrorString) as INTERNAL, and
  RESOURCE_EXHAUSTED "%s: CUDA_ERROR_OUT_OF_MEMORY: out of memory" without the "CUDA error: ".
- openxla/xla xla/service/gpu/nccl_errors.cc ToStatus (commit not pinned; later moved under
  xla/backends/gpu/collectives): "%s:%d: NCCL operation %s failed: %s. Last NCCL warning(error) log
  entry (may be unrelated) '%s'." (INTERNAL).
- jax-ml/jax jaxlib/jax.cc, jax/errors.py @cec06d116c: the Python exception is
  jax.errors.JaxRuntimeError (jaxlib.xla_extension.XlaRuntimeError in older jaxlib).

Verdicts by the label policy: XLA's device OOM (and CUDA_ERROR_OUT_OF_MEMORY, NCCL's "Cuda failure
'out of memory'") oom_gpu / job; its host-memory allocator's OOM oom_host / job; CUDA illegal or
misaligned address and launch failure user_code / job, uncorrectable ECC gpu_hardware / node; NCCL
invalid usage user_code / job. The wrapped CUDA and NCCL errors are read by the CUDA and NCCL
families: no JAX rule is needed for them, the probes pin that they stay read. A survivor's
fate-sharing shutdown in the same log never outranks the cause.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params
from tests.correlator.test_rules_emitter_formats_jax import (
    BARRIER,
    BARRIER_VALUES,
    FATAL_NEW,
    TASKS,
    TIMEOUT,
    UNHEALTHY,
    logged,
    raised,
)

ALLOC = "openxla/xla xla/stream_executor/integrations/tf_allocator_adapter.cc@370cfa8d30"
CUSTATUS = "openxla/xla xla/stream_executor/cuda/cuda_status.cc ToStatusSlow"
NCCLST = "openxla/xla xla/service/gpu/nccl_errors.cc ToStatus"
OOM_GPU = ("oom_gpu", "job")
OOM_HOST = ("oom_host", "job")
USER = ("user_code", "job")

_BYTES = (3743729664, 33762398024, 17179869184, 536870912, 1024)
OOM = [
    raised(
        "xla-device-oom",
        ALLOC,
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate {n} bytes.",
        OOM_GPU,
        n=_BYTES,
    ),
    logged(
        "xla-device-oom-logged",
        ALLOC,
        "Execution of replica {r} failed: RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate {n} bytes.",
        OOM_GPU,
        "E",
        "pjrt_stream_executor_client.cc",
        r=(0, 3, 7),
        n=_BYTES,
    ),
    raised(
        "xla-host-oom",
        ALLOC,
        "RESOURCE_EXHAUSTED: Out of host memory while trying to allocate {n} bytes. Please "
        "set the environment variable XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB to allocate larger "
        "host memory than the default 64 GB.",
        OOM_HOST,
        n=_BYTES,
    ),
]

# (CUresult name, cuGetErrorString text, the CUDA family's verdict)
_CU = (
    ("CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered", USER),
    ("CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure", USER),
    ("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address", USER),
    (
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "uncorrectable ECC error encountered",
        ("gpu_hardware", "node"),
    ),
)
_DETAIL = (
    "Failed to launch CUDA kernel: fusion_123 with block dimensions: 128x1x1",
    "failed to synchronize the stop event",
    "Could not synchronize CUDA stream",
)
WRAPPED = [
    *[
        raised(
            f"xla-cuda-{name}",
            CUSTATUS,
            "INTERNAL: CUDA error: {detail}: " + f"{name}: {text}",
            want,
            detail=_DETAIL,
        )
        for name, text, want in _CU
    ],
    raised(
        "xla-cuda-oom",
        CUSTATUS,
        "RESOURCE_EXHAUSTED: {detail}: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        OOM_GPU,
        detail=("Failed to allocate 2147483648 bytes", "cuMemAlloc failed"),
    ),
    raised(
        "xla-nccl-cuda-oom",
        NCCLST,
        "INTERNAL: {file}:{line}: NCCL operation {expr} failed: unhandled cuda error (run with "
        "NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated) "
        "'Cuda failure 'out of memory''.",
        OOM_GPU,
        file=("external/xla/xla/service/gpu/nccl_utils.cc", "xla/service/gpu/nccl_api.cc"),
        line=(305, 134),
        expr=("ncclCommInitRank(&comm, nranks, id, rank)", "ncclGroupEnd()"),
    ),
    raised(
        "xla-nccl-invalid-usage",
        NCCLST,
        "INTERNAL: {file}:{line}: NCCL operation {expr} failed: invalid usage (run with "
        "NCCL_DEBUG=WARN for details). Last NCCL warning(error) log entry (may be unrelated) "
        "''.",
        USER,
        file=("external/xla/xla/service/gpu/nccl_utils.cc", "xla/service/gpu/nccl_api.cc"),
        line=(162, 511),
        expr=(
            "ncclAllReduce(send_buffer, recv_buffer, count, datatype, reduce_op, comm, stream)",
            "ncclGroupEnd()",
        ),
    ),
]


FORMATS = OOM + WRAPPED


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_an_xla_runtime_error_reads_as_its_source_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)


_FATE = (
    "F0926 17:26:32.075587  157988 client.h:77] "
    + FATAL_NEW
    + "UNAVAILABLE: "
    + UNHEALTHY.format(task=TASKS[0])
    + "\n"
)


@pytest.mark.parametrize(
    ("cause", "want"),
    [
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
            "trying to allocate 3743729664 bytes.\n",
            OOM_GPU,
        ),
        (
            "jax.errors.JaxRuntimeError: INTERNAL: CUDA error: Could not synchronize CUDA stream: "
            "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n",
            USER,
        ),
        (
            "DEADLINE_EXCEEDED: " + BARRIER.format(**{k: v[0] for k, v in BARRIER_VALUES.items()}),
            TIMEOUT,
        ),
    ],
)
def test_a_fate_sharing_shutdown_gives_way_to_the_cause_in_the_same_log(
    cause: str, want: tuple[str | None, str]
) -> None:
    # the surviving tasks' "another task died" lines are consequences: the cause wins
    for text in (cause + _FATE, _FATE + cause):
        got = explain_text(text)
        assert (got.category, got.blame) == want, (text, got.explanation)
