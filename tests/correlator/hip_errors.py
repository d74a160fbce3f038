"""Every hipError_t, its name and the text hipGetErrorString returns (issue #11's enumeration).

Source: ROCm/clr hipamd/src/hip_error.cpp @0bf2a9834c (ihipGetErrorName, ihipGetErrorString);
the numbers from ROCm/HIP include/hip/hip_runtime_api.h (they mirror cudaError_t's). Each row is
"number name verdict" then the string, indented; the verdict keys are the CUDA probe's
(tests/correlator/test_rules_emitter_formats_cuda.py), since rocm.json reads each code as its
CUDA counterpart, plus RUNTIME for HIP's own 1052/1053 (the ROCr runtime below HIP failed).
"""

from __future__ import annotations

from dataclasses import dataclass

HIP_ERROR_SOURCE = "ROCm/clr hipamd/src/hip_error.cpp@0bf2a9834c"

JOB = ("user_code", "job")
NODE = ("node", "node")
# A usage error whose docs do not name the program outright: anything but the node's fault
USAGE = frozenset({JOB, (None, "unknown")})
# The program's environment or the node's (the docs do not say which)
ENV = frozenset({JOB, NODE, ("node", "unknown"), (None, "unknown"), ("gpu_hardware", "unknown")})
VERDICTS: dict[str, frozenset[tuple[str | None, str]]] = {
    "JOB": frozenset({JOB}),
    "OOM": frozenset({("oom_gpu", "job")}),
    "ECC": frozenset({("gpu_hardware", "node")}),
    "NODE": frozenset({NODE}),
    # 999: as cuda.json's cuda_unknown_error_text, the GPU's but not settled
    "UNKNOWN": frozenset({("gpu_hardware", "unknown")}),
    # 1052/1053: a call into the HSA runtime failed, whose fault is not said
    "RUNTIME": frozenset({("node", "unknown")}),
    "USAGE": USAGE,
    "ENV": ENV,
}

_TABLE = """
1 hipErrorInvalidValue JOB
    invalid argument
2 hipErrorOutOfMemory OOM
    out of memory
3 hipErrorNotInitialized ENV
    initialization error
4 hipErrorDeinitialized USAGE
    driver shutting down
5 hipErrorProfilerDisabled USAGE
    profiler disabled while using external profiling tool
6 hipErrorProfilerNotInitialized USAGE
    profiler is not initialized
7 hipErrorProfilerAlreadyStarted USAGE
    profiler already started
8 hipErrorProfilerAlreadyStopped USAGE
    profiler already stopped
9 hipErrorInvalidConfiguration JOB
    invalid configuration argument
12 hipErrorInvalidPitchValue JOB
    invalid pitch argument
13 hipErrorInvalidSymbol JOB
    invalid device symbol
17 hipErrorInvalidDevicePointer JOB
    invalid device pointer
21 hipErrorInvalidMemcpyDirection JOB
    invalid copy direction for memcpy
# 35: the program's build asks more than the node's driver has (cuda.json cuda_insufficient_driver)
35 hipErrorInsufficientDriver ENV
    driver version is insufficient for runtime version
52 hipErrorMissingConfiguration JOB
    __global__ function call is not configured
53 hipErrorPriorLaunchFailure JOB
    unspecified launch failure in prior launch
98 hipErrorInvalidDeviceFunction JOB
    invalid device function
100 hipErrorNoDevice NODE
    no ROCm-capable device is detected
101 hipErrorInvalidDevice JOB
    invalid device ordinal
200 hipErrorInvalidImage JOB
    device kernel image is invalid
201 hipErrorInvalidContext USAGE
    invalid device context
202 hipErrorContextAlreadyCurrent USAGE
    context is already current context
205 hipErrorMapFailed USAGE
    mapping of buffer object failed
206 hipErrorUnmapFailed USAGE
    unmapping of buffer object failed
207 hipErrorArrayIsMapped JOB
    array is mapped
208 hipErrorAlreadyMapped JOB
    resource already mapped
209 hipErrorNoBinaryForGpu JOB
    no kernel image is available for execution on the device
210 hipErrorAlreadyAcquired JOB
    resource already acquired
211 hipErrorNotMapped JOB
    resource not mapped
212 hipErrorNotMappedAsArray JOB
    resource not mapped as array
213 hipErrorNotMappedAsPointer JOB
    resource not mapped as pointer
214 hipErrorECCNotCorrectable ECC
    uncorrectable ECC error encountered
215 hipErrorUnsupportedLimit JOB
    limit is not supported on this architecture
216 hipErrorContextAlreadyInUse ENV
    exclusive-thread device already in use by a different thread
217 hipErrorPeerAccessUnsupported ENV
    peer access is not supported between these two devices
218 hipErrorInvalidKernelFile JOB
    invalid kernel file
219 hipErrorInvalidGraphicsContext JOB
    invalid OpenGL or DirectX context
300 hipErrorInvalidSource JOB
    device kernel image is invalid
301 hipErrorFileNotFound USAGE
    file not found
302 hipErrorSharedObjectSymbolNotFound ENV
    shared object symbol not found
303 hipErrorSharedObjectInitFailed ENV
    shared object initialization failed
304 hipErrorOperatingSystem ENV
    OS call failed or operation not supported on this OS
400 hipErrorInvalidHandle JOB
    invalid resource handle
401 hipErrorIllegalState JOB
    the operation cannot be performed in the present state
500 hipErrorNotFound JOB
    named symbol not found
600 hipErrorNotReady USAGE
    device not ready
700 hipErrorIllegalAddress JOB
    an illegal memory access was encountered
701 hipErrorLaunchOutOfResources JOB
    too many resources requested for launch
702 hipErrorLaunchTimeOut JOB
    the launch timed out and was terminated
704 hipErrorPeerAccessAlreadyEnabled JOB
    peer access is already enabled
705 hipErrorPeerAccessNotEnabled JOB
    peer access has not been enabled
708 hipErrorSetOnActiveProcess JOB
    cannot set while device is active in this process
709 hipErrorContextIsDestroyed USAGE
    context is destroyed
710 hipErrorAssert JOB
    device-side assert triggered
712 hipErrorHostMemoryAlreadyRegistered JOB
    part or all of the requested memory range is already mapped
713 hipErrorHostMemoryNotRegistered JOB
    pointer does not correspond to a registered memory region
719 hipErrorLaunchFailure JOB
    unspecified launch failure
720 hipErrorCooperativeLaunchTooLarge JOB
    too many blocks in cooperative launch
801 hipErrorNotSupported USAGE
    operation not supported
900 hipErrorStreamCaptureUnsupported JOB
    operation not permitted when stream is capturing
901 hipErrorStreamCaptureInvalidated JOB
    operation failed due to a previous error during capture
902 hipErrorStreamCaptureMerge JOB
    operation would result in a merge of separate capture sequences
903 hipErrorStreamCaptureUnmatched JOB
    capture was not ended in the same stream as it began
904 hipErrorStreamCaptureUnjoined JOB
    capturing stream has unjoined work
905 hipErrorStreamCaptureIsolation JOB
    dependency created on uncaptured work in another stream
906 hipErrorStreamCaptureImplicit JOB
    operation would make the legacy stream depend on a capturing blocking stream
907 hipErrorCapturedEvent JOB
    operation not permitted on an event last recorded in a capturing stream
908 hipErrorStreamCaptureWrongThread JOB
    attempt to terminate a thread-local capture sequence from another thread
910 hipErrorGraphExecUpdateFailure JOB
    the graph update was not performed because it included changes which violated constraints specific to instantiated graph update
999 hipErrorUnknown UNKNOWN
    unknown error
1052 hipErrorRuntimeMemory RUNTIME
    runtime memory call returned error
1053 hipErrorRuntimeOther RUNTIME
    runtime call other than memory returned error
"""  # noqa: E501


@dataclass(frozen=True)
class HipError:
    """One hipError_t: its number, name, hipGetErrorString text and allowed verdicts."""

    num: int
    name: str
    text: str
    ok: frozenset[tuple[str | None, str]]


def _parse(table: str) -> list[HipError]:
    lines = [ln for ln in table.strip("\n").splitlines() if not ln.startswith("#")]
    out = []
    for head, text in zip(lines[::2], lines[1::2], strict=True):
        num, name, verdict = head.split()
        out.append(HipError(int(num), name, text.strip(), VERDICTS[verdict]))
    return out


HIP_ERRORS = _parse(_TABLE)
