"""PyTorch's c10d / ProcessGroupNCCL / TCPStore and torchrun's formats against the explain rules.

Formats from pytorch/pytorch (paths cited per format): ProcessGroupNCCL.cpp's watchdog and
heartbeat lines behind glog's "[rankN]:[E%m%d %T.%f file:line] " prefix (and the pre-2.2 "[E
file:line] "); NCCLUtils.hpp C10D_NCCL_CHECK's "NCCL error in: %s:%d, %s, NCCL version %s\\n%s"
with ncclGetErrorString and getNcclErrorDetailStr; TCPStore.cpp / socket.cpp's SocketImpl and
client-socket errors ("[host]:port" addresses, IPv6 bracketed); torch/distributed/elastic's
'failed (exitcode: ...)' and ChildFailedError report (errors/__init__.py @0140b62d8b), whose
host is socket.getfqdn() and whose signal names come from Python's signal.Signals.
"""

from __future__ import annotations

import signal

import pytest

from tests.correlator.emitter_probe import Fmt, check, params, strerror

_PG = "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp@cf1380dfb6"
_GLOG = (
    "[rank{rank}]:[E{md} {hms}.{us} ProcessGroupNCCL.cpp:{line}] ",
    "[E ProcessGroupNCCL.cpp:{line}] ",
)
_CLOCK = {"md": ("1102", "0312"), "hms": ("04:10:01", "23:59:59"), "us": ("118000", "511201204")}
TIMEOUT = ("nccl_timeout_unknown", "unknown")
NET = ("interconnect", "unknown")
# c10d prints "[host]:port" (socket.cpp formatSockAddr); (as printed, the host)
C10D_PEERS = (
    ("[gpu-a-01]:29500", "gpu-a-01"),
    ("[10.4.0.17]:29500", "10.4.0.17"),
    ("[2001:db8:12::17]:43117", "2001:db8:12::17"),
    ("[node0412.cluster.example.org]:55903", "node0412.cluster.example.org"),
    ("[::ffff:10.4.0.21]:50810", "10.4.0.21"),
    ("10.99.91.59:5000", "10.99.91.59"),
)
FQDNS = ("gpu-a-07.cluster.local", "node0123", "ip-10-1-2-3.ec2.internal", "nid001234")

WATCHDOG = [
    Fmt(
        "pg-watchdog",
        _PG,
        "{pg}Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
        "NumelIn={n}, NumelOut={n}, Timeout(ms)={ms}) ran for {ran} milliseconds before timing "
        "out.\n",
        {
            "rank": (0, 7, 63),
            "line": (632, 1412),
            "seq": (1, 811, 64214),
            "pg": ("[Rank 3] ", "[PG ID 0 PG GUID 0(default_pg) Rank 12] ", "[PG 1 Rank 5] "),
            "op": (
                "ALLREDUCE",
                "_ALLGATHER_BASE",
                "REDUCE_SCATTER",
                "BROADCAST",
                "SEND",
                "RECV",
                "COALESCED",
                "ALLTOALL_BASE",
                "BARRIER",
            ),
            "n": (1, 1048576),
            "ms": (600000, 1800000),
            "ran": (600081, 1800013),
            **_CLOCK,
        },
        TIMEOUT,
        prefixes=_GLOG,
    ),
    Fmt(
        "pg-heartbeat",
        _PG,
        "[PG ID {pg} PG GUID {pg}({name}) Rank {rank}] Heartbeat monitor timed out! Process will "
        "be terminated after dumping debug info. workMetaList_.size()={n}\n",
        {
            "rank": (0, 7, 63),
            "line": (1412, 1650),
            "pg": (0, 2),
            "name": ("default_pg", "dp"),
            "n": (1, 3),
            **_CLOCK,
        },
        TIMEOUT,
        prefixes=_GLOG,
    ),
]

# getNcclErrorDetailStr (NCCLUtils.cpp), by ncclResult_t, with the family's reading
_NCCL_RESULTS = {
    1: (
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
        ("user_code", "job"),
    ),
    2: (
        "unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
        "device error. ",
        NET,
    ),
    3: (
        "internal error - please report this issue to the NCCL developers",
        "ncclInternalError: Internal check failed.",
        NET,
    ),
    4: (
        "invalid argument (run with NCCL_DEBUG=WARN for details)",
        "ncclInvalidArgument: Invalid value for an argument.",
        ("user_code", "job"),
    ),
    5: (
        "invalid usage (run with NCCL_DEBUG=WARN for details)",
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
        ("user_code", "job"),
    ),
    6: (
        "remote process exited or there was a network error",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.",
        NET,
    ),
}
NCCL_CHECK = [
    Fmt(
        f"c10d-nccl-check-{code}",
        "pytorch/pytorch torch/csrc/distributed/c10d/NCCLUtils.hpp@04dbcd01a2",
        "torch.distributed.DistBackendError: NCCL error in: {file}:{line}, "
        + text
        + ", NCCL version {ver}\n"
        + detail
        + "\n",
        {
            "file": (
                "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
                "/opt/pytorch/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp",
            ),
            "line": (1970, 275, 3356),
            "ver": ("2.21.5", "2.18.1", "2.26.2"),
        },
        want,
    )
    for code, (text, detail, want) in _NCCL_RESULTS.items()
]

STORE = [
    Fmt(
        "tcpstore-socket-failed",
        "pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp@b874478480",
        "[W{md} {hms}.{us} TCPStore.cpp:{line}] [c10d] {call} failed on SocketImpl(fd={fd}, "
        "addr={addr}, remote={peer}): {err}\n",
        {
            "call": ("recvValue", "recvValueWithTimeout", "sendBytes", "recvBytes"),
            "line": (106, 125),
            "fd": (26, 81, 170),
            "addr": ("[gpu-a-07]:51546", "10.4.0.9:33978"),
            "peer": C10D_PEERS,
            "err": (
                "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote "
                "server shutdown or crash?",
                strerror("ECONNRESET"),
                strerror("EPIPE"),
                strerror("ETIMEDOUT"),
            ),
            **_CLOCK,
        },
        NET,
        "peer",
    ),
    Fmt(
        "c10d-client-connect",
        "https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/socket.cpp",
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any "
        "network address of ({host}, {port}). The client socket has failed to connect to "
        "{peer} (errno: {n} - {err}).\n",
        {
            "host": ("gpu-a-01", "10.4.0.17", "node0412.cluster.example.org"),
            "port": (29500, 23456),
            "peer": C10D_PEERS[:3],
            "n": (111, 113),
            "err": (strerror("ECONNREFUSED"), strerror("EHOSTUNREACH")),
        },
        NET,
        "host",
    ),
    Fmt(
        "c10d-client-timeout",
        "https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/socket.cpp",
        "torch.distributed.DistNetworkError: The client socket has timed out after {s}s while "
        "trying to connect to ({host}, {port}).\n",
        {
            "host": ("gpu-a-01", "10.4.0.17", "node0412.cluster.example.org"),
            "s": (600, 1800),
            "port": (29500, 23456),
        },
        NET,
        "host",
    ),
]

# (exitcode as ChildFailedError / api.py print it, the signals reasoner's reading)
_EXITS = (
    (-9, ("oom_host", "unknown")),
    (-11, ("user_code", "job")),
    (-6, ("user_code", "job")),
    (-7, ("oom_host", "unknown")),
    (-8, ("user_code", "job")),
    (-4, ("user_code", "job")),
    (1, ("user_code", "job")),
    (127, ("user_code", "job")),
)


def _sig(code: int) -> str:
    return signal.Signals(-code).name if code < 0 else "<N/A>"


ELASTIC = [
    Fmt(
        f"elastic-failed-{code}",
        "pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py@8f4329ea55",
        "E{md} {hms}.{us} {pid} torch/distributed/elastic/multiprocessing/api.py:{line}] failed "
        f"(exitcode: {code}) local_rank: {{lr}} (pid: {{pid}}) of binary: {{binary}}\n",
        {
            "pid": (8812, 1234567),
            "line": (862, 874),
            "lr": (0, 4, 7),
            "binary": ("/usr/bin/python3", "/opt/conda/bin/python"),
            **_CLOCK,
        },
        want,
    )
    for code, want in _EXITS
] + [
    Fmt(
        f"child-failed-{code}",
        "pytorch/pytorch torch/distributed/elastic/multiprocessing/errors/__init__.py@0140b62d8b",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "{script} FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n[0]:\n"
        "  time      : 2026-11-02_04:09:40\n"
        "  host      : {host}\n"
        "  rank      : {rank} (local_rank: {lr})\n"
        f"  exitcode  : {code} (pid: {{pid}})\n"
        "  error_file: <N/A>\n"
        "  traceback : "
        + (
            f"Signal {-code} ({_sig(code)}) received by PID {{pid}}\n"
            if code < 0
            else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        )
        + "============================================================\n",
        {
            "script": ("train.py", "/workspace/pretrain_gpt.py"),
            "host": FQDNS,
            "rank": (12, 0, 255),
            "lr": (4, 0, 7),
            "pid": (8812, 1234567),
        },
        want,
        "host",
    )
    for code, want in _EXITS
]

FORMATS = WATCHDOG + NCCL_CHECK + STORE + ELASTIC


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_pytorch_line_reads_as_its_family_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
