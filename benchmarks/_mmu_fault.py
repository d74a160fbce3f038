"""Provoke a harmless application MMU fault (Xid 31) on GPU 0: a kernel writes to a wild address.

Run as its own process (`python -m benchmarks._mmu_fault`): the CUDA context is unusable after
the fault, and only this process is affected. Uses CuPy when installed (as the recorded fault
run did), else the CUDA driver API through ctypes with a tiny PTX kernel. Exits 0 when the
fault was reported as CUDA_ERROR_ILLEGAL_ADDRESS (700), 2 when CUDA is unavailable.
"""

from __future__ import annotations

import ctypes
import sys

WILD = 0xDEAD0000000  # the address of the recorded fault ("faulted @ 0xdea_d0000000")

PTX = b"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry wild_write(.param .u64 p)
{
    .reg .u64 %rd<2>;
    .reg .u32 %r<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 42;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
CUDA_ERROR_ILLEGAL_ADDRESS = 700


def with_cupy() -> str:
    """Fault through CuPy's RawKernel; returns the error text."""
    import cupy

    kernel = cupy.RawKernel(
        r'extern "C" __global__ void wild_write(int* p) { *p = 42; }', "wild_write"
    )
    kernel((1,), (1,), (cupy.uint64(WILD),))
    try:
        cupy.cuda.runtime.deviceSynchronize()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def with_ctypes() -> str:
    """Fault through libcuda directly (cuModuleLoadData + cuLaunchKernel)."""
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(rc: int, what: str) -> None:
        """Raise on a CUresult other than CUDA_SUCCESS."""
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    check(cuda.cuInit(0), "cuInit")
    dev, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    check(cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(PTX)), "cuModuleLoadData")
    check(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"wild_write"), "cuModuleGetFunction")
    arg = ctypes.c_uint64(WILD)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(arg), ctypes.c_void_p))
    check(cuda.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None), "cuLaunchKernel")
    rc = cuda.cuCtxSynchronize()
    return f"cuCtxSynchronize -> CUresult {rc}" + (
        " (CUDA_ERROR_ILLEGAL_ADDRESS)" if rc == CUDA_ERROR_ILLEGAL_ADDRESS else ""
    )


def main() -> int:
    """Provoke the fault; print what CUDA said."""
    try:
        import cupy  # noqa: F401

        text = with_cupy()
    except ImportError:
        try:
            text = with_ctypes()
        except OSError as exc:
            print(f"no CUDA driver: {exc}")
            return 2
    print(text)
    return 0 if "ILLEGAL_ADDRESS" in text.upper() or "illegal" in text.lower() else 1


if __name__ == "__main__":
    sys.exit(main())
