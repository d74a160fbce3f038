"""Every HIP error code, in the forms real programs print it, against the explain rules.

The codes and texts: tests/correlator/hip_errors.py (ROCm/clr hip_error.cpp). Each is wrapped as
its printers write it: PyTorch on ROCm (the hipified c10_cuda_check_implementation, "HIP error: "
+ hipGetErrorString), the usual HIP_CHECK macro ("HIP error: <string> at <file>:<line>", e.g.
rocBLAS/hipBLASLt clients and many HIP samples), CuPy on ROCm (CUDARuntimeError "<name>: <string>",
cupy_backends/cuda/api/runtime.pyx) and Triton's AMD backend (third_party/amd/backend/driver.c
gpuAssert: "Triton Error [HIP]:  Code: %d, Messsage: %s"). A bare hipGetErrorString text with no
HIP marker ("error: 'file not found'(301) at ...") is left unread on purpose: the words alone are
any program's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from correlator.explain import explain_text
from tests.correlator.hip_errors import HIP_ERRORS, HipError

_HINT = (
    "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace "
    "below might be incorrect.\nFor debugging consider passing AMD_SERIALIZE_KERNEL=3\n"
)
WRAPPERS: tuple[tuple[str, str], ...] = (
    ("torch", "RuntimeError: HIP error: {text}\n" + _HINT),
    ("hip-check", "HIP error: {text} at /src/kernels/{file}:{line}\n"),
    ("cupy", "cupy_backends.cuda.api.runtime.CUDARuntimeError: {name}: {text}\n"),
    ("triton", "RuntimeError: Triton Error [HIP]:  Code: {num}, Messsage: {text}\n"),
)
_FILES = ("gemm.hip", "main.cpp", "reduce.hip")


def _probes() -> Iterator[Any]:
    for i, err in enumerate(HIP_ERRORS):
        for key, template in WRAPPERS:
            text = template.format(
                text=err.text, name=err.name, num=err.num, file=_FILES[i % 3], line=40 + i
            )
            yield pytest.param(err, text, id=f"{key}-{err.num}")


def test_the_enumeration_holds_every_hip_error_once() -> None:
    # hip_error.cpp's ihipGetErrorString: every case but hipSuccess (and hipErrorTbd, no text)
    nums = [e.num for e in HIP_ERRORS]
    assert len(nums) == len(set(nums)) == 72


@pytest.mark.parametrize(("err", "text"), list(_probes()))
def test_a_hip_error_reads_as_its_cuda_counterpart_documents(err: HipError, text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) in err.ok, (err.num, text, got.explanation)


@pytest.mark.parametrize("err", HIP_ERRORS, ids=lambda e: str(e.num))
def test_a_bare_hip_error_name_is_recognised(err: HipError) -> None:
    got = explain_text(f"hipDeviceSynchronize() returned {err.name}\n")
    assert (got.category, got.blame) in err.ok, (err.num, got.explanation)
