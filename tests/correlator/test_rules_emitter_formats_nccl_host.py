"""NCCL's WARN formats about the host's resources and the program's own mistakes.

Shared memory (src/os/linux.cc ncclShmOpen/ncclShmClose, read by strerror's text), allocations
(src/include/alloc.h), CUDACHECK's "Cuda failure '%s'" with cudaGetErrorString's texts
(src/include/checks.h), truncated messages (src/transport/net_socket.cc, src/bootstrap.cc) and
init.cc's version and GPU checks, behind debug.cc's prefixes: NVIDIA/nccl @ NCCL_COMMIT. The
socket and InfiniBand lines are in test_rules_emitter_formats.py.
"""

from __future__ import annotations

import pytest

from tests.correlator.emitter_probe import PEERS, Fmt, check, errnos, params, warn

HOST_RESOURCES = [
    warn(
        "shm-segment-space",
        "src/os/linux.cc",
        "ncclShmOpen",
        "Error while {verb} shared memory segment {path} (size {size}), error: {err} ({n})",
        ("oom_host", "job"),
        verb=("creating", "attaching to"),
        path=("/dev/shm/nccl-Hk2Pq1", "/dev/shm/nccl-xZ09aB"),
        size=(9637888, 4194304, 1073741824),
        err=errnos("ENOSPC", "ENOMEM"),
        n=(28, 12),
    ),
    warn(
        "shm-file-space",
        "src/os/linux.cc",
        "ncclShmOpen",
        "Error: failed to create shared memory file {path}, error {err} ({n})",
        ("oom_host", "job"),
        path=("/dev/shm/nccl-Hk2Pq1", "/dev/shm/nccl-xZ09aB"),
        err=errnos("ENOSPC", "ENOMEM"),
        n=(28, 12),
    ),
    warn(
        "shm-extend",
        "src/os/linux.cc",
        "ncclShmOpen",
        "Error: failed to extend {path} to {size} bytes, error: {err} ({n})",
        ("oom_host", "job"),
        path=("/dev/shm/nccl-Hk2Pq1", "/dev/shm/nccl-xZ09aB"),
        size=(9637888, 1073741824),
        err=errnos("ENOSPC", "ENOMEM"),
        n=(28, 12),
    ),
    warn(
        "shm-permission",
        "src/os/linux.cc",
        "ncclShmOpen",
        "Error while {verb} shared memory segment {path} (size {size}), error: {err} ({n})",
        ("node", "node"),
        verb=("creating", "attaching to"),
        path=("/dev/shm/nccl-Hk2Pq1", "/dev/shm/nccl-xZ09aB"),
        size=(9637888, 4194304),
        err=errnos("EACCES"),
        n=(13,),
    ),
    warn(
        "shm-unlink",
        "src/os/linux.cc",
        "ncclShmClose",
        "unlink shared memory {path} failed, error: {err} ({n})",
        ("node", "node"),
        path=("/dev/shm/nccl-Hk2Pq1", "/dev/shm/nccl-xZ09aB"),
        err=errnos("ENOENT"),
        n=(2,),
    ),
    warn(
        "cuda-alloc",
        "src/include/alloc.h",
        "ncclCudaCallocAsync",
        "Failed to CUDA {kind} {size} bytes",
        ("oom_gpu", "job"),
        kind=("calloc", "malloc", "calloc async"),
        size=(2097152, 1073741824, 512),
    ),
    warn(
        "host-alloc",
        "src/include/alloc.h",
        "ncclCudaHostCalloc",
        "Failed to {kind} {size} bytes",
        ("oom_host", "job"),
        kind=("CUDA host alloc", "malloc"),
        size=(2097152, 1073741824, 512),
    ),
    # checks.h CUDACHECK: "Cuda failure '%s'" with cudaGetErrorString's text
    warn(
        "cuda-failure-oom",
        "src/include/checks.h",
        "ncclCudaCalloc",
        "Cuda failure '{err}'",
        ("oom_gpu", "job"),
        err=("out of memory",),
    ),
    warn(
        "cuda-failure-program",
        "src/include/checks.h",
        "ncclStrongStreamSynchronize",
        "Cuda failure '{err}'",
        ("user_code", "job"),
        err=(
            "an illegal memory access was encountered",
            "unspecified launch failure",
            "device-side assert triggered",
            "misaligned address",
            "an illegal instruction was encountered",
        ),
    ),
    warn(
        "cuda-failure-ecc",
        "src/include/checks.h",
        "ncclStrongStreamSynchronize",
        "Cuda failure '{err}'",
        ("gpu_hardware", "node"),
        err=("uncorrectable ECC error encountered",),
    ),
]

PROGRAM = [
    warn(
        "socket-truncated",
        "src/transport/net_socket.cc",
        "ncclNetSocketTest",
        "NET/Socket : peer {peer} message truncated : receiving {sent} bytes instead of {posted}. "
        "If you believe your socket network is in a healthy state, there may be a mismatch in "
        "collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks",
        ("user_code", "job"),
        peer=PEERS,
        sent=(1048576, 8),
        posted=(524288, 4),
    ),
    warn(
        "bootstrap-truncated",
        "src/bootstrap.cc",
        "socketRecv",
        "Message truncated : received {sent} bytes instead of {posted}",
        ("user_code", "job"),
        sent=(1048576, 8, 4096),
        posted=(524288, 4, 64),
    ),
    warn(
        "version-mismatch",
        "src/init.cc",
        "initTransportsRank",
        "Mismatched NCCL version detected : rank {r} version {v} rank {r2} version {v2}",
        ("user_code", "job"),
        r=(0, 7),
        v=(22703, 21805),
        r2=(8, 15),
        v2=(21805, 22304),
    ),
    warn(
        "same-gpu",
        "src/init.cc",
        "initTransportsRank",
        "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to "
        "enable this configuration.",
        ("user_code", "job"),
    ),
]

FORMATS = HOST_RESOURCES + PROGRAM


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_an_nccl_host_warn_reads_as_its_family_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
