"""Every CUDA error code, in the forms real programs print it, against the explain rules.

The codes: cudaError_t (driver_types.h) and CUresult (cuda.h), their enum names and the text
cudaGetErrorString / cuGetErrorString return (CUDA runtime and driver API docs,
group__CUDART__TYPES / group__CUDA__TYPES; the texts as libcudart/libcuda return them, e.g.
CUDA 12.x: 700 'an illegal memory access was encountered'). Each is wrapped as its printers write
it: PyTorch's C10_CUDA_CHECK (c10/cuda/CUDAException.cpp "CUDA error: " + cudaGetErrorString, the
CUDA_LAUNCH_BLOCKING hint of CUDAMiscFunctions.cpp, and since 2.6 "Search for `<name>' in ..."),
C10_CUDA_DRIVER_CHECK ("CUDA driver error: "), cuda-samples' helper_cuda.h (checkCudaErrors'
"CUDA error at %s:%d code=%d(%s) \\"%s\\"", getLastCudaError's "%s(%i) : getLastCudaError() CUDA
error : %s : (%d) %s."), CuPy's CUDARuntimeError / CUDADriverError ("%s: %s", name and string),
numba's CudaAPIError ("[%d] Call to %s results in %s"), TensorFlow/XLA's stream executor
("<what>: CUDA_ERROR_X: <string>") and Triton's gpuAssert ("Triton Error [CUDA]: %s").

The verdict per code follows cuda.json (and patterns_job/patterns_hw): where the docs settle the
meaning the exact verdict is asserted; where they do not (an initialisation error, a JIT library
missing, an OS call failing: the program's environment or the node's) the probe asserts only that
nothing wrong is said (no OOM, fabric or scheduler reading, and for usage errors no node blame).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from correlator.explain import explain_text

_DOCS = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"

JOB = ("user_code", "job")
OOM = ("oom_gpu", "job")
ECC = ("gpu_hardware", "node")
NVLINK = ("interconnect", "node")  # cuda.json cuda_nvlink_uncorrectable
NODE = ("node", "node")
MPS_END = ("node", "unknown")  # cuda.json cuda_mps_client_ended: whose fault is not said
CONTAINED = ("gpu_hardware", "unknown")  # cuda.json cuda_contained
# 999: cuda.json reads it as the GPU's, the node blamed only when cuInit itself failed
UNKNOWN = frozenset({("gpu_hardware", "unknown"), ("gpu_hardware", "node")})
# A usage error whose docs do not name the program outright: anything but the node's fault
USAGE = frozenset({JOB, (None, "unknown")})
# The program's environment or the node's (docs do not say which): no OOM/fabric/scheduler
ENV = frozenset({JOB, NODE, ("node", "unknown"), (None, "unknown"), ("gpu_hardware", "unknown")})

# number, cudaError_t name, CUresult name ('-': none), verdict; then the string, indented
_TABLE = """
1 cudaErrorInvalidValue CUDA_ERROR_INVALID_VALUE JOB
    invalid argument
2 cudaErrorMemoryAllocation CUDA_ERROR_OUT_OF_MEMORY OOM
    out of memory
3 cudaErrorInitializationError CUDA_ERROR_NOT_INITIALIZED ENV
    initialization error
4 cudaErrorCudartUnloading CUDA_ERROR_DEINITIALIZED USAGE
    driver shutting down
5 cudaErrorProfilerDisabled CUDA_ERROR_PROFILER_DISABLED USAGE
    profiler disabled while using external profiling tool
9 cudaErrorInvalidConfiguration - JOB
    invalid configuration argument
12 cudaErrorInvalidPitchValue - JOB
    invalid pitch argument
13 cudaErrorInvalidSymbol - JOB
    invalid device symbol
16 cudaErrorInvalidHostPointer - JOB
    invalid host pointer
17 cudaErrorInvalidDevicePointer - JOB
    invalid device pointer
18 cudaErrorInvalidTexture - JOB
    invalid texture reference
21 cudaErrorInvalidMemcpyDirection - JOB
    invalid copy direction for memcpy
34 cudaErrorStubLibrary CUDA_ERROR_STUB_LIBRARY NODE
    CUDA driver is a stub library
# 35: the job's CUDA build is newer than the driver (cuda.json cuda_insufficient_driver)
35 cudaErrorInsufficientDriver - JOB
    CUDA driver version is insufficient for CUDA runtime version
# 36: as 35: the program's CUDA build asks more than the node's driver has
36 cudaErrorCallRequiresNewerDriver - JOB
    API call is not supported in the installed CUDA driver
43 cudaErrorDuplicateVariableName - JOB
    duplicate global variable looked up by string name
46 cudaErrorDevicesUnavailable CUDA_ERROR_DEVICE_UNAVAILABLE NODE
    CUDA-capable device(s) is/are busy or unavailable
52 cudaErrorMissingConfiguration - JOB
    __global__ function call is not configured
# 53 and 902-910: texts as HIP copies them (ROCm/clr hipamd/src/hip_error.cpp, CUDA's strings)
53 cudaErrorPriorLaunchFailure - JOB
    unspecified launch failure in prior launch
98 cudaErrorInvalidDeviceFunction - JOB
    invalid device function
100 cudaErrorNoDevice CUDA_ERROR_NO_DEVICE NODE
    no CUDA-capable device is detected
101 cudaErrorInvalidDevice CUDA_ERROR_INVALID_DEVICE JOB
    invalid device ordinal
102 cudaErrorDeviceNotLicensed CUDA_ERROR_DEVICE_NOT_LICENSED NODE
    device doesn't have valid Grid license
127 cudaErrorStartupFailure - ENV
    startup failure in cuda runtime
200 cudaErrorInvalidKernelImage CUDA_ERROR_INVALID_IMAGE JOB
    device kernel image is invalid
201 cudaErrorDeviceUninitialized CUDA_ERROR_INVALID_CONTEXT USAGE
    invalid device context
202 - CUDA_ERROR_CONTEXT_ALREADY_CURRENT USAGE
    context already current
205 cudaErrorMapBufferObjectFailed CUDA_ERROR_MAP_FAILED USAGE
    mapping of buffer object failed
206 cudaErrorUnmapBufferObjectFailed CUDA_ERROR_UNMAP_FAILED USAGE
    unmapping of buffer object failed
207 cudaErrorArrayIsMapped CUDA_ERROR_ARRAY_IS_MAPPED JOB
    array is mapped
208 cudaErrorAlreadyMapped CUDA_ERROR_ALREADY_MAPPED JOB
    resource already mapped
209 cudaErrorNoKernelImageForDevice CUDA_ERROR_NO_BINARY_FOR_GPU JOB
    no kernel image is available for execution on the device
210 cudaErrorAlreadyAcquired CUDA_ERROR_ALREADY_ACQUIRED JOB
    resource already acquired
211 cudaErrorNotMapped CUDA_ERROR_NOT_MAPPED JOB
    resource not mapped
212 cudaErrorNotMappedAsArray CUDA_ERROR_NOT_MAPPED_AS_ARRAY JOB
    resource not mapped as array
213 cudaErrorNotMappedAsPointer CUDA_ERROR_NOT_MAPPED_AS_POINTER JOB
    resource not mapped as pointer
214 cudaErrorECCUncorrectable CUDA_ERROR_ECC_UNCORRECTABLE ECC
    uncorrectable ECC error encountered
215 cudaErrorUnsupportedLimit CUDA_ERROR_UNSUPPORTED_LIMIT JOB
    limit is not supported on this architecture
# 216: the GPU's compute mode (the node's setting) or the program's own threads
216 cudaErrorDeviceAlreadyInUse CUDA_ERROR_CONTEXT_ALREADY_IN_USE ENV
    exclusive-thread device already in use by a different thread
# 217: the node's topology, or the program asking for it on GPUs that cannot
217 cudaErrorPeerAccessUnsupported CUDA_ERROR_PEER_ACCESS_UNSUPPORTED ENV
    peer access is not supported between these two devices
218 cudaErrorInvalidPtx CUDA_ERROR_INVALID_PTX JOB
    a PTX JIT compilation failed
219 cudaErrorInvalidGraphicsContext CUDA_ERROR_INVALID_GRAPHICS_CONTEXT JOB
    invalid OpenGL or DirectX context
220 cudaErrorNvlinkUncorrectable CUDA_ERROR_NVLINK_UNCORRECTABLE NVLINK
    uncorrectable NVLink error detected during the execution
221 cudaErrorJitCompilerNotFound CUDA_ERROR_JIT_COMPILER_NOT_FOUND ENV
    PTX JIT compiler library not found
# 222: the program's PTX is newer than the node's driver (as 35)
222 cudaErrorUnsupportedPtxVersion CUDA_ERROR_UNSUPPORTED_PTX_VERSION JOB
    the provided PTX was compiled with an unsupported toolchain.
223 cudaErrorJitCompilationDisabled CUDA_ERROR_JIT_COMPILATION_DISABLED ENV
    PTX JIT compilation was disabled
224 cudaErrorUnsupportedExecAffinity CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY JOB
    the provided execution affinity is not supported
226 cudaErrorContained CUDA_ERROR_CONTAINED CONTAINED
    Invalid access of peer GPU memory over nvlink or a hardware error
300 cudaErrorInvalidSource CUDA_ERROR_INVALID_SOURCE JOB
    device kernel image is invalid
301 cudaErrorFileNotFound CUDA_ERROR_FILE_NOT_FOUND USAGE
    file not found
302 cudaErrorSharedObjectSymbolNotFound CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND ENV
    shared object symbol not found
303 cudaErrorSharedObjectInitFailed CUDA_ERROR_SHARED_OBJECT_INIT_FAILED ENV
    shared object initialization failed
304 cudaErrorOperatingSystem CUDA_ERROR_OPERATING_SYSTEM ENV
    OS call failed or operation not supported on this OS
400 cudaErrorInvalidResourceHandle CUDA_ERROR_INVALID_HANDLE JOB
    invalid resource handle
401 cudaErrorIllegalState CUDA_ERROR_ILLEGAL_STATE JOB
    the operation cannot be performed in the present state
500 cudaErrorSymbolNotFound CUDA_ERROR_NOT_FOUND JOB
    named symbol not found
600 cudaErrorNotReady CUDA_ERROR_NOT_READY USAGE
    device not ready
700 cudaErrorIllegalAddress CUDA_ERROR_ILLEGAL_ADDRESS JOB
    an illegal memory access was encountered
701 cudaErrorLaunchOutOfResources CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES JOB
    too many resources requested for launch
702 cudaErrorLaunchTimeout CUDA_ERROR_LAUNCH_TIMEOUT JOB
    the launch timed out and was terminated
703 cudaErrorLaunchIncompatibleTexturing CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING JOB
    launch uses incompatible texturing mode
704 cudaErrorPeerAccessAlreadyEnabled CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED JOB
    peer access is already enabled
705 cudaErrorPeerAccessNotEnabled CUDA_ERROR_PEER_ACCESS_NOT_ENABLED JOB
    peer access has not been enabled
708 cudaErrorSetOnActiveProcess CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE JOB
    cannot set while device is active in this process
709 cudaErrorContextIsDestroyed CUDA_ERROR_CONTEXT_IS_DESTROYED USAGE
    context is destroyed
710 cudaErrorAssert CUDA_ERROR_ASSERT JOB
    device-side assert triggered
711 cudaErrorTooManyPeers CUDA_ERROR_TOO_MANY_PEERS JOB
    peer mapping resources exhausted
712 cudaErrorHostMemoryAlreadyRegistered CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED JOB
    part or all of the requested memory range is already mapped
713 cudaErrorHostMemoryNotRegistered CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED JOB
    pointer does not correspond to a registered memory region
714 cudaErrorHardwareStackError CUDA_ERROR_HARDWARE_STACK_ERROR JOB
    hardware stack error
715 cudaErrorIllegalInstruction CUDA_ERROR_ILLEGAL_INSTRUCTION JOB
    an illegal instruction was encountered
716 cudaErrorMisalignedAddress CUDA_ERROR_MISALIGNED_ADDRESS JOB
    misaligned address
717 cudaErrorInvalidAddressSpace CUDA_ERROR_INVALID_ADDRESS_SPACE JOB
    operation not supported on global/shared address space
718 cudaErrorInvalidPc CUDA_ERROR_INVALID_PC JOB
    invalid program counter
719 cudaErrorLaunchFailure CUDA_ERROR_LAUNCH_FAILED JOB
    unspecified launch failure
720 cudaErrorCooperativeLaunchTooLarge CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE JOB
    too many blocks in cooperative launch
800 cudaErrorNotPermitted CUDA_ERROR_NOT_PERMITTED USAGE
    operation not permitted
801 cudaErrorNotSupported CUDA_ERROR_NOT_SUPPORTED USAGE
    operation not supported
802 cudaErrorSystemNotReady CUDA_ERROR_SYSTEM_NOT_READY NODE
    system not yet initialized
803 cudaErrorSystemDriverMismatch CUDA_ERROR_SYSTEM_DRIVER_MISMATCH NODE
    system has unsupported display driver / cuda driver combination
# 804: cuda.json cuda_insufficient_driver
804 cudaErrorCompatNotSupportedOnDevice CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE JOB
    forward compatibility was attempted on non supported HW
805 cudaErrorMpsConnectionFailed CUDA_ERROR_MPS_CONNECTION_FAILED NODE
    MPS client failed to connect to the MPS control daemon or the MPS server
806 cudaErrorMpsRpcFailure CUDA_ERROR_MPS_RPC_FAILURE NODE
    the remote procedural call between the MPS server and the MPS client failed
807 cudaErrorMpsServerNotReady CUDA_ERROR_MPS_SERVER_NOT_READY NODE
    MPS server is not ready to accept new MPS client requests
808 cudaErrorMpsMaxClientsReached CUDA_ERROR_MPS_MAX_CLIENTS_REACHED MPS_END
    the hardware resources required to create MPS client have been exhausted
# 809: the MPS server's connection slots, as 808's client slots
809 cudaErrorMpsMaxConnectionsReached CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED MPS_END
    the hardware resources required to support device connections have been exhausted
810 cudaErrorMpsClientTerminated CUDA_ERROR_MPS_CLIENT_TERMINATED MPS_END
    the MPS client has been terminated by the server
900 cudaErrorStreamCaptureUnsupported CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED JOB
    operation not permitted when stream is capturing
901 cudaErrorStreamCaptureInvalidated CUDA_ERROR_STREAM_CAPTURE_INVALIDATED JOB
    operation failed due to a previous error during capture
902 cudaErrorStreamCaptureMerge CUDA_ERROR_STREAM_CAPTURE_MERGE JOB
    operation would result in a merge of separate capture sequences
903 cudaErrorStreamCaptureUnmatched CUDA_ERROR_STREAM_CAPTURE_UNMATCHED JOB
    capture was not ended in the same stream as it began
904 cudaErrorStreamCaptureUnjoined CUDA_ERROR_STREAM_CAPTURE_UNJOINED JOB
    capturing stream has unjoined work
905 cudaErrorStreamCaptureIsolation CUDA_ERROR_STREAM_CAPTURE_ISOLATION JOB
    dependency created on uncaptured work in another stream
906 cudaErrorStreamCaptureImplicit CUDA_ERROR_STREAM_CAPTURE_IMPLICIT JOB
    operation would make the legacy stream depend on a capturing blocking stream
907 cudaErrorCapturedEvent CUDA_ERROR_CAPTURED_EVENT JOB
    operation not permitted on an event last recorded in a capturing stream
908 cudaErrorStreamCaptureWrongThread CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD JOB
    attempt to terminate a thread-local capture sequence from another thread
909 cudaErrorTimeout CUDA_ERROR_TIMEOUT USAGE
    wait operation timed out
910 cudaErrorGraphExecUpdateFailure CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE JOB
    the graph update was not performed because it included changes which violated constraints specific to instantiated graph update
911 cudaErrorExternalDevice CUDA_ERROR_EXTERNAL_DEVICE ENV
    an async error has occured in external entity outside of CUDA
912 cudaErrorInvalidClusterSize CUDA_ERROR_INVALID_CLUSTER_SIZE JOB
    a kernel launch error has occurred due to cluster misconfiguration
# 999: cuda.json: the GPU's; the node blamed where cuInit itself failed
999 cudaErrorUnknown CUDA_ERROR_UNKNOWN UNKNOWN
    unknown error
"""  # noqa: E501

_VERDICTS: dict[str, frozenset[tuple[str | None, str]]] = {
    "JOB": frozenset({JOB}),
    "OOM": frozenset({OOM}),
    "ECC": frozenset({ECC}),
    "NVLINK": frozenset({NVLINK}),
    "NODE": frozenset({NODE}),
    "MPS_END": frozenset({MPS_END}),
    "CONTAINED": frozenset({CONTAINED}),
    "UNKNOWN": UNKNOWN,
    "USAGE": USAGE,
    "ENV": ENV,
}


@dataclass(frozen=True)
class Code:
    """One CUDA error: its number, runtime and driver enum names, string and allowed verdicts."""

    num: int
    rt: str | None
    drv: str | None
    text: str
    ok: frozenset[tuple[str | None, str]]


def _codes(table: str) -> list[Code]:
    lines = [ln for ln in table.strip("\n").splitlines() if not ln.startswith("#")]
    out = []
    for head, text in zip(lines[::2], lines[1::2], strict=True):
        num, rt, drv, verdict = head.split()
        out.append(
            Code(int(num), None if rt == "-" else rt, None if drv == "-" else drv,
                 text.strip(), _VERDICTS[verdict])
        )  # fmt: skip
    return out


CODES = _codes(_TABLE)
_HINT = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1."
)
# (key, which enum name it prints, template); {name} is that enum name, {text} the string
WRAPPERS: tuple[tuple[str, str, str], ...] = (
    # c10/cuda/CUDAException.cpp c10_cuda_check_implementation (torch 1.13-2.5)
    ("torch", "rt", "RuntimeError: CUDA error: {text}\n" + _HINT + "\n"
     "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"),
    # torch >= 2.6: get_cuda_error_help names the enum; 2.8 raises torch.AcceleratorError
    ("torch-help", "rt", "torch.AcceleratorError: CUDA error: {text}\nSearch for `{name}' in "
     f"{_DOCS} for more information.\n" + _HINT + "\n"),
    # c10/cuda/CUDAException.h C10_CUDA_DRIVER_CHECK: cuGetErrorString's text
    ("torch-driver", "drv", "RuntimeError: CUDA driver error: {text}\n"),
    # cuda-samples Common/helper_cuda.h check() and __getLastCudaError
    ("samples-check", "rt",
     'CUDA error at {file}:{line} code={num}({name}) "{call}" \n'),
    ("samples-last", "rt",
     "{file}({line}) : getLastCudaError() CUDA error : {what} : ({num}) {text}.\n"),
    # cupy_backends/cuda/api/runtime.pyx CUDARuntimeError, driver.pyx CUDADriverError
    ("cupy-rt", "rt", "cupy_backends.cuda.api.runtime.CUDARuntimeError: {name}: {text}\n"),
    ("cupy-drv", "drv", "cupy_backends.cuda.api.driver.CUDADriverError: {name}: {text}\n"),
    # numba/cuda/cudadrv/driver.py _check_ctypes_error: CudaAPIError(retcode, msg)
    ("numba", "drv",
     "numba.cuda.cudadrv.driver.CudaAPIError: [{num}] Call to {fn} results in {name}\n"),
    # TensorFlow stream_executor/cuda/cuda_driver.cc, XLA cuda_status.cc: "<what>: NAME: text"
    ("tf", "drv", "E0312 08:14:02.511234  4711 cuda_driver.cc:1247] could not synchronize on "
     "CUDA context: {name}: {text} :: *** Begin stack trace ***\n"),
    ("xla", "drv", "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: {what}: {name}: {text}\n"),
    # triton third_party/nvidia/backend/driver.c gpuAssert
    ("triton", "drv", "RuntimeError: Triton Error [CUDA]: {text}\n"),
)  # fmt: skip
_FILL = {
    "file": ("/src/kernels/matmul.cu", "sample.cu", "vectorAdd.cu"),
    "line": (52, 1187, 9),
    "call": ("cudaDeviceSynchronize()", "cudaMemcpy(d_A, h_A, size, cudaMemcpyHostToDevice)"),
    "what": ("Kernel execution failed", "Could not synchronize CUDA stream", ""),
    "fn": ("cuCtxSynchronize", "cuMemAlloc", "cuLaunchKernel"),
}


def _probes() -> Iterator[Any]:
    for i, code in enumerate(CODES):
        for key, which, template in WRAPPERS:
            name = code.rt if which == "rt" else code.drv
            if name is None:  # a runtime-only code has no CUresult, and the other way round
                continue
            fill = {k: v[i % len(v)] for k, v in _FILL.items()}
            text = template.format(name=name, text=code.text, num=code.num, **fill)
            yield pytest.param(code, text, id=f"{key}-{code.num}")


@pytest.mark.parametrize(("code", "text"), list(_probes()))
def test_a_cuda_error_reads_as_the_cuda_family_documents(code: Code, text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) in code.ok, (code.num, text, got.explanation)
