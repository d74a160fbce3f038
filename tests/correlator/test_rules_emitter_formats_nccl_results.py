"""Every ncclResult_t's text, as each printer of it writes it, against the explain rules.

The texts: NVIDIA/nccl src/init.cc ncclGetErrorString (@5067397c26; the short forms before 2.12,
e.g. 'internal error', are the same switch in older releases). The printers: PyTorch's
C10D_NCCL_CHECK (torch/csrc/distributed/c10d/NCCLUtils.hpp "NCCL error in: %s:%d, %s, NCCL version
%s\\n%s", the detail from getNcclErrorDetailStr; before 1.13 no detail line), nccl-tests'
NCCLCHECK (src/common.h "%s: Test NCCL failure %s:%d '%s / %s'"), vLLM's pynccl NCCL_CHECK
("NCCL error: %s"), CuPy's NcclError (cupy_backends/cuda/libs/nccl.pyx "%s: %s", ERROR2's names,
codes 1-5 only) and XLA's "NCCL operation %s failed: %s" (xla/service/gpu/nccl_utils.cc). The
verdicts are nccl.json's: a CUDA call or an argument/usage error is the program's; a system,
internal or remote error is the network's or a peer's, unsettled; ncclInProgress (an operation
still running when the caller needed it done) settles nothing but that it did not finish.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from correlator.explain import explain_text

JOB = ("user_code", "job")
NET = ("interconnect", "unknown")
PENDING = ("nccl_timeout_unknown", "unknown")

# number: (enum name, string since 2.12, string before, PyTorch's detail, CuPy's name, verdict)
RESULTS: dict[int, tuple[str, str, str, str, str | None, tuple[str, str]]] = {
    1: ("ncclUnhandledCudaError", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "unhandled cuda error", "Call to CUDA function failed.",
        "NCCL_ERROR_UNHANDLED_CUDA_ERROR", JOB),
    2: ("ncclSystemError", "unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "unhandled system error",
        "System call (e.g. socket, malloc) or external library call failed or device error. ",
        "NCCL_ERROR_SYSTEM_ERROR", NET),
    3: ("ncclInternalError", "internal error - please report this issue to the NCCL developers",
        "internal error", "Internal check failed.", "NCCL_ERROR_INTERNAL_ERROR", NET),
    4: ("ncclInvalidArgument", "invalid argument (run with NCCL_DEBUG=WARN for details)",
        "invalid argument", "Invalid value for an argument.", "NCCL_ERROR_INVALID_ARGUMENT", JOB),
    5: ("ncclInvalidUsage", "invalid usage (run with NCCL_DEBUG=WARN for details)",
        "invalid usage", "This usually reflects invalid usage of NCCL library.",
        "NCCL_ERROR_INVALID_USAGE", JOB),
    6: ("ncclRemoteError", "remote process exited or there was a network error",
        "remote process exited or there was a network error",
        "A call failed possibly due to a network error or a remote process exiting prematurely.",
        None, NET),
    7: ("ncclInProgress", "NCCL operation in progress", "NCCL operation in progress",
        "", None, PENDING),
}  # fmt: skip

_TORCH = (
    "torch.distributed.DistBackendError: NCCL error in: {file}:{line}, {text}, NCCL version {v}\n"
)
_FILES = ("../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "/opt/pytorch/NCCLUtils.hpp")
# (key, which string: "new" or "old", template)
WRAPPERS: tuple[tuple[str, str, str], ...] = (
    ("torch", "new", _TORCH + "{name}: {detail}\nLast error:\n"),
    ("torch-old", "old", _TORCH.replace("torch.distributed.DistBackendError", "RuntimeError")),
    ("nccl-tests", "new", "gpu-a-07: Test NCCL failure common.cu:{line} '{text} / '\n"),
    ("nccl-tests-old", "old", "node0123: Test NCCL failure all_reduce.cu:{line} '{text}'\n"),
    ("vllm", "new", "RuntimeError: NCCL error: {text}\n"),
    ("cupy", "old", "cupy_backends.cuda.libs.nccl.NcclError: {cupy}: {text}\n"),
    ("xla", "new", "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: NCCL operation "
     "ncclAllReduce(send_buffer, recv_buffer, count, dtype, reduce_op, comm, stream) failed: "
     "{text}. Last NCCL warning(error) log entry (may be unrelated) ''.\n"),
)  # fmt: skip


def _probes() -> Iterator[Any]:
    for num, (name, new, old, detail, cupy, want) in RESULTS.items():
        for key, which, template in WRAPPERS:
            if key == "cupy" and cupy is None:  # CuPy's ERROR2 names codes 1-5 only
                continue
            text = template.format(
                file=_FILES[num % 2], line=1960 + num, v=("2.21.5", "2.7.8")[num % 2],
                text=new if which == "new" else old, name=name, detail=detail, cupy=cupy,
            )  # fmt: skip
            yield pytest.param(text, want, id=f"{key}-{num}")


@pytest.mark.parametrize(("text", "want"), list(_probes()))
def test_a_nccl_result_reads_as_nccl_json_documents(text: str, want: tuple[str, str]) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == want, (text, got.explanation)


def test_a_nccl_result_never_blames_the_node() -> None:
    for param in _probes():
        assert explain_text(param.values[0]).blame != "node", param.values[0]
