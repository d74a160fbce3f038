"""CUDA 12.x error codes whose strings are not reproduced, probed by name against the rules.

The rest of cudaError_t (driver_types.h) and CUresult (cuda.h) beyond
test_rules_emitter_formats_cuda.py's table (CUDA runtime and driver API docs, group__CUDART__TYPES
/ group__CUDA__TYPES; the names as in e.g. CUDA 12.8's headers): the deprecated texture and
profiler codes, dynamic parallelism (65-69, 811-812), green contexts (914-915) and the rest are the
program's; 103 (the runtime's self-tests failed) and 916 (confidential computing key rotation)
the program's environment or the node's. They are printed by name alone by cuda-samples' check()
(Common/helper_cuda.h) and numba's CudaAPIError (numba/cuda/cudadrv/driver.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from correlator.explain import explain_text

JOB = frozenset({("user_code", "job")})
USAGE = frozenset({("user_code", "job"), (None, "unknown")})
ENV = frozenset(
    {("user_code", "job"), ("node", "node"), ("node", "unknown"), (None, "unknown"),
     ("gpu_hardware", "unknown")}
)  # fmt: skip
_VERDICTS = {"JOB": JOB, "USAGE": USAGE, "ENV": ENV}

# number, cudaError_t name, CUresult name ('-': none), verdict
_NAMES_ONLY = """
6 cudaErrorProfilerNotInitialized CUDA_ERROR_PROFILER_NOT_INITIALIZED USAGE
7 cudaErrorProfilerAlreadyStarted CUDA_ERROR_PROFILER_ALREADY_STARTED USAGE
8 cudaErrorProfilerAlreadyStopped CUDA_ERROR_PROFILER_ALREADY_STOPPED USAGE
19 cudaErrorInvalidTextureBinding - JOB
20 cudaErrorInvalidChannelDescriptor - JOB
22 cudaErrorAddressOfConstant - JOB
23 cudaErrorTextureFetchFailed - JOB
24 cudaErrorTextureNotBound - JOB
25 cudaErrorSynchronizationError - JOB
26 cudaErrorInvalidFilterSetting - JOB
27 cudaErrorInvalidNormSetting - JOB
28 cudaErrorMixedDeviceExecution - JOB
31 cudaErrorNotYetImplemented - JOB
32 cudaErrorMemoryValueTooLarge - JOB
37 cudaErrorInvalidSurface - JOB
44 cudaErrorDuplicateTextureName - JOB
45 cudaErrorDuplicateSurfaceName - JOB
49 cudaErrorIncompatibleDriverContext - USAGE
65 cudaErrorLaunchMaxDepthExceeded - JOB
66 cudaErrorLaunchFileScopedTex - JOB
67 cudaErrorLaunchFileScopedSurf - JOB
68 cudaErrorSyncDepthExceeded - JOB
69 cudaErrorLaunchPendingCountExceeded - JOB
103 cudaErrorSoftwareValidityNotEstablished - ENV
402 cudaErrorLossyQuery CUDA_ERROR_LOSSY_QUERY JOB
721 cudaErrorTensorMemoryLeak CUDA_ERROR_TENSOR_MEMORY_LEAK JOB
811 cudaErrorCdpNotSupported CUDA_ERROR_CDP_NOT_SUPPORTED JOB
812 cudaErrorCdpVersionMismatch CUDA_ERROR_CDP_VERSION_MISMATCH JOB
913 cudaErrorFunctionNotLoaded CUDA_ERROR_FUNCTION_NOT_LOADED JOB
914 cudaErrorInvalidResourceType CUDA_ERROR_INVALID_RESOURCE_TYPE JOB
915 cudaErrorInvalidResourceConfiguration CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION JOB
916 cudaErrorKeyRotation CUDA_ERROR_KEY_ROTATION ENV
"""
# (key, which enum name it prints, template)
_WRAPPERS = (
    ("samples-check", "rt", 'CUDA error at {file}:{line} code={num}({name}) "{call}" \n'),
    ("numba", "drv",
     "numba.cuda.cudadrv.driver.CudaAPIError: [{num}] Call to {fn} results in {name}\n"),
)  # fmt: skip
_FILES = ("/src/kernels/matmul.cu", "sample.cu", "vectorAdd.cu")
_CALLS = ("cudaDeviceSynchronize()", "cudaGraphLaunch(exec, stream)")
_FNS = ("cuCtxSynchronize", "cuLaunchKernel", "cuGraphInstantiate")


def _probes() -> Iterator[Any]:
    for i, line in enumerate(_NAMES_ONLY.strip().splitlines()):
        num, rt, drv, verdict = line.split()
        fill = {"file": _FILES[i % 3], "line": 20 + i, "call": _CALLS[i % 2], "fn": _FNS[i % 3]}
        for key, which, template in _WRAPPERS:
            name = rt if which == "rt" else drv
            if name != "-":
                text = template.format(name=name, num=num, **fill)
                yield pytest.param(text, _VERDICTS[verdict], id=f"{key}-{num}")


@pytest.mark.parametrize(("text", "ok"), list(_probes()))
def test_a_cuda_error_name_alone_reads_as_the_cuda_family_documents(
    text: str, ok: frozenset[tuple[str | None, str]]
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) in ok, (text, got.explanation)
