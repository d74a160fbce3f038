"""collector/parse/joblog_cuda.py on CUDA error wordings of older PyTorch releases, with
made-up values (the fixture-based tests are in test_joblog_parse.py)."""

from __future__ import annotations

import pytest

from collector.parse.joblog import parse_job_line
from timeline.models import EventKind

THC = "/pytorch/aten/src/THC/generic/THCStorage.cu"


@pytest.mark.parametrize(
    "line",
    [
        # torch <= 1.4, aten/src/THC/THCGeneral.cpp __THCudaCheck: the warning, then the error
        f"THCudaCheck FAIL file={THC} line=58 error=2 : out of memory",
        f"RuntimeError: cuda runtime error (2) : out of memory at {THC}:58",
    ],
)
def test_old_torch_thc_out_of_memory_is_a_cuda_oom(line: str) -> None:
    ev = parse_job_line(line)
    assert ev is not None and ev.kind is EventKind.CUDA_OOM


def test_old_torch_thc_other_errors_stay_cuda_errors() -> None:
    ev = parse_job_line(
        f"RuntimeError: cuda runtime error (59) : device-side assert triggered at {THC}:7"
    )
    assert ev is not None and ev.kind is EventKind.CUDA_ERROR and ev.code == 710
