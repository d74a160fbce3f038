"""Probe set thirty (NVSHMEM): its error macros, transports, IB completions and symmetric heap.

Read from NVIDIA/nvshmem @2d7d25f0816235e3c2b51779571ec032606ea0dd:
src/include/non_abi/nvshmemx_error.h (NVSHMEMI_ERROR_PRINT / _EXIT "%s:%s:%d: " file, function,
line; NVSHMEMI_NZ_ERROR_JMP / _ERROR_JMP "%s:%d: non-zero status: %d "), src/host/util/debug.cpp
(WARN "%s:%d:%d [%d] %s:%d NVSHMEM WARN ", INFO "%s:%d:%d [%d] NVSHMEM INFO "), util.h
CUDA_RUNTIME_CHECK ("[%s:%d] cuda failed with %s "), src/host/transport/transport.cpp,
src/modules/transport/{ibgda,ibrc,ibdevx}, ibgda_device.cuh, src/host/init/init.cu and
src/host/mem/mem_heap.cpp. The error macros print no host: a journal's syslog prefix names it.
Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import (
    HOSTS,
    NAMED_PEERS,
    NET,
    PEERS,
    Fmt,
    check,
    errnos,
    params,
)

SRC = "NVIDIA/nvshmem {}@2d7d25f081"
# where NVSHMEM was built (the macros print __FILE__ as the compiler saw it)
_ROOTS = {
    "root": (
        "/workspace/nvshmem_src",
        "/dvs/p4/build/sw/rel/gpgpu/toolkit/r12.0/main_nvshmem",
        "/opt/nvshmem-3.2.5",
    )
}
# the program's stderr in the node's journal (the macros name no host of their own)
_JOURNAL = ("{mon} {host} python3[{pid}]: ",)
_JV = {"mon": ("Nov 29 10:00:01", "Mar  3 07:44:19"), "pid": (4411, 902211), "host": HOSTS}
NODE = ("node", "node")

FORMATS = (
    Fmt(
        "no-peermem",
        SRC.format("src/modules/transport/ibgda/ibgda.cpp"),
        "{root}/src/modules/transport/{tr}/{tr}.cpp:nvshmemt_init:{line}: neither nv_peer_mem, "
        "or nvidia_peermem detected. Skipping transport.\n",
        {**_ROOTS, **_JV, "tr": ("ibgda", "ibrc", "ibdevx"), "line": (4558, 1846, 1986)},
        NODE,
        culprit="host",
        prefixes=_JOURNAL,
    ),
    Fmt(
        "ibrc-wc-error",
        SRC.format("src/modules/transport/ibrc/ibrc.cpp"),
        "{root}/src/modules/transport/ibrc/ibrc.cpp:1071: non-zero status: {st} ibv_poll_cq "
        "failed, status: {st}\n",
        {**_ROOTS, **_JV, "st": (12, 5, 4, 13, 10)},
        ("interconnect", "infra"),
        culprit="host",
        prefixes=_JOURNAL,
    ),
    Fmt(
        "ibdevx-cqe-error",
        SRC.format("src/modules/transport/ibdevx/ibdevx.cpp"),
        "{root}/src/modules/transport/ibdevx/ibdevx.cpp:967: non-zero status: 7 Got ibdevx "
        "completion with error. hws: {hws} ves: {ves}, syn: {syn}\n",
        {**_ROOTS, **_JV, "hws": ("0", "2"), "ves": ("81", "f4"), "syn": ("15", "4", "5")},
        ("interconnect", "infra"),
        culprit="host",
        prefixes=_JOURNAL,
    ),
    Fmt(
        "ibgda-cqe-error",
        SRC.format("src/include/non_abi/device/pt-to-pt/ibgda_device.cuh"),
        "[{pe}] got completion with err:\n   syndrome={syn}, vendor_err_synd=0x81, "
        "hw_err_synd=0x0, hw_synd_type=0x0,\n   wqe_counter=0x1a1, s_wqe_opcode_qpn=0x8002d8,\n"
        "   cqn=0x4c1, cons_idx=0x1a2, prod_idx=0x1a3, idx=0x1a3\n",
        {"pe": (3, 0, 15), "syn": ("0x15", "0x4", "0x5")},
        ("interconnect", "infra"),
    ),
    Fmt(
        "ibgda-poll-timeout",
        SRC.format("src/include/non_abi/device/pt-to-pt/ibgda_device.cuh"),
        "[{pe}] ibgda_poll_cq timeout:\n    cons_idx={c}, prod_idx=0x1a3, cqn=0x4c1, qpn=0x2d8, "
        "opcode=0xd\n    wqe_counter=0x1a1, resv_head=0x1a3, ready_head=0x1a3\n    while "
        "waiting for idx=0x1a3.\n",
        {"pe": (3, 0, 127), "c": ("0x1a2", "0x0")},
        ("nccl_timeout_unknown", "unknown"),
    ),
    Fmt(
        "heap-exhausted",
        SRC.format("src/host/mem/mem_heap.cpp"),
        "{root}/src/host/mem/mem_heap.cpp:{line}: non-zero status: {st} {msg}\n",
        {
            **_ROOTS,
            "line": (1746, 1908),
            "st": (1, 7),
            "msg": (
                "Not enough space for allocating memory",
                "Not enough space for mmaping buffer 0x7f2a40000000 size 1073741824",
            ),
        },
        ("oom_gpu", "job"),
    ),
    Fmt(
        "cuda-runtime-oom",
        SRC.format("src/include/internal/host/util.h"),
        "[{root}/src/host/mem/mem_heap.cpp:{line}] cuda failed with out of memory \n",
        {**_ROOTS, "line": (612, 88)},
        ("oom_gpu", "job"),
    ),
    Fmt(
        "api-before-init",
        SRC.format("src/host/init/init.cu"),
        "{root}/src/host/init/init.cu:nvshmemi_check_state_and_init:1198: nvshmem API called "
        "before nvshmem_init \n",
        _ROOTS,
        ("user_code", "job"),
    ),
    Fmt(
        "transport-init-failed",
        SRC.format("src/host/transport/transport.cpp"),
        "{root}/src/host/transport/transport.cpp:nvshmemi_transport_init:{line}: {msg}\n",
        {
            **_ROOTS,
            **_JV,
            "line": (282, 90, 300),
            "msg": (
                "init failed for transport: IBGDA",
                "init failed for transport: P2P",
                "Unable to initialize any transports. returning error.",
            ),
        },
        ("node", "unknown"),
        culprit="host",
        prefixes=_JOURNAL,
    ),
    # the UID bootstrap carries NCCL's socket code with WARN mapped to BOOTSTRAP_ERROR_PRINT
    # (src/modules/bootstrap/uid/ncclSocket/ncclsocket_debug.h): the peer it names is the culprit
    Fmt(
        "uid-bootstrap-connect",
        SRC.format("src/modules/bootstrap/uid/ncclSocket/ncclsocket_socket.cpp"),
        "{root}/src/modules/bootstrap/uid/ncclSocket/ncclsocket_socket.cpp:socketStartConnect:"
        "496: socketStartConnect: Connect to {peer} failed : {err}\n",
        {**_ROOTS, "peer": PEERS, "err": errnos("ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH")},
        NET,
        culprit="peer",
    ),
    Fmt(
        "uid-bootstrap-closed-by-peer",
        SRC.format("src/modules/bootstrap/uid/ncclSocket/ncclsocket_socket.cpp"),
        "{root}/src/modules/bootstrap/uid/ncclSocket/ncclsocket_socket.cpp:socketProgress:59: "
        "socketProgress: Connection closed by remote peer {peer}\n",
        {**_ROOTS, "peer": NAMED_PEERS},
        NET,
        culprit="peer",
    ),
    Fmt(
        "init-failed",
        SRC.format("src/host/init/init.cu"),
        "{root}/{where}: {msg} \n",
        {
            **_ROOTS,
            "where": (
                "src/host/init/init.cu:nvshmemi_check_state_and_init:1200",
                "src/host/init/init.cu:1111",
                "src/host/bootstrap/bootstrap_loader.cpp:103",
                "src/include/host/nvshmem_api.h:57",
            ),
            "msg": (
                "nvshmem initialization failed, exiting",
                "non-zero status: 7 nvshmem transport init failed",
                "non-zero status: 7 Bootstrap plugin init failed for 'nvshmem_bootstrap_mpi.so.3'",
                "non-zero status: 7: Success, exiting... aborting due to error in "
                "nvshmemi_init_thread",
            ),
        },
        ("node", "unknown"),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_an_nvshmem_error_reads_as_its_family_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


INIT_FAILED = (
    "/workspace/nvshmem_src/src/host/init/init.cu:nvshmemi_check_state_and_init:1200: nvshmem "
    "initialization failed, exiting \n"
)
NO_PEERMEM = (
    "/workspace/nvshmem_src/src/modules/transport/ibgda/ibgda.cpp:nvshmemt_init:4558: neither "
    "nv_peer_mem, or nvidia_peermem detected. Skipping transport.\n"
)


@pytest.mark.parametrize("cause_first", [True, False])
def test_the_missing_peermem_module_explains_the_init_failure_after_it(cause_first: bool) -> None:
    text = NO_PEERMEM + INIT_FAILED if cause_first else INIT_FAILED + NO_PEERMEM
    got = explain_text(text)
    assert (got.category, got.blame) == NODE, got.explanation


@pytest.mark.parametrize(
    "line",
    [
        # debug.cpp's WARN / INFO prefixes; informational lines of a healthy start
        "gpu-a-07:3117:3190 [0] /workspace/nvshmem_src/src/host/init/init.cu:1151 NVSHMEM WARN "
        "Proxy thread shares a core with the main PE, performance may be impacted",
        "gpu-a-07:3117:3190 [0] /workspace/nvshmem_src/src/host/transport/transport.cpp:94 "
        "NVSHMEM WARN P2P access was disabled in the environment",
        "gpu-a-07:3117:3190 [0] /workspace/nvshmem_src/src/host/team/team_internal_nvls.cpp:58 "
        "NVSHMEM WARN Missing NVLS platform support. Skipping NVLS initialization",
        # transport.cpp: "non-fatal error, so changing to a warning"
        "gpu-a-07:3117:3190 [0] NVSHMEM INFO init failed for remote transport: ibrc",
        "gpu-a-07:3117:3190 [0] NVSHMEM INFO IBGDA Disabled by the environment.",
    ],
)
def test_an_informational_nvshmem_line_is_no_failure(line: str) -> None:
    assert explain_text(line + "\n").category is None
