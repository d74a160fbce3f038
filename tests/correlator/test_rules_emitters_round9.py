"""Round nine: the same messages as the emitters printed them in OLDER (and the newest) releases.

Each rule file was written from one commit of its emitter; logs in the wild come from releases
of 2019-2024 whose wording differs. Every line here is an emitter's format string at a cited
version (see the family's `sources`) filled in with made-up hosts, addresses and numbers.
NCCL and the interconnect; the CUDA, launcher, scheduler and node families are in
test_rules_emitters_round9_node.py.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

HOST = "gpu-a-03:4411:4470 [2] NCCL WARN "
PEER = "10.40.2.17<43321>"


def verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


# NCCL's socket connect failure, by release: (release, line)
NCCL_CONNECT = [
    # src/include/socket.h, v2.4.8-1 .. v2.9.9-1: connectAddress()
    ("2.4-2.9", f"Connect to {PEER} failed : Connection refused"),
    # src/include/socket.h, v2.10.3-1; src/misc/socket.cc v2.12.12-1 .. v2.14.3-1
    ("2.10-2.17", f"Net : Connect to {PEER} failed : No route to host"),
    # src/misc/socket.cc v2.18.3-1 .. v2.22.3-1: socketStartConnect
    ("2.18-2.22", f"socketStartConnect: Connect to {PEER} failed : Connection timed out"),
    # src/misc/socket.cc v2.26.2-1: funcName prefix, socketPollConnect
    ("2.26", f"socketPollConnect: Connect to {PEER} failed : Connection refused"),
    # v2.21.5-1: socketPollConnect's getsockopt(SO_ERROR) report
    (
        "2.21",
        f"socketPollConnect: Connect to {PEER} returned 111(Connection refused) errno 115"
        "(Operation now in progress)",
    ),
    # src/os/linux.cc v2.30.7-1: lower-case 'connect to'
    ("2.30", f"socketStartConnect: connect to {PEER} failed : Connection refused"),
    (
        "2.30 retries",
        f"socketPollConnect: connect to {PEER} returned Connection refused, exceeded error "
        "retry count after 35 attempts",
    ),
    ("2.30 poll", f"ncclOsSocketPollConnect to {PEER} failed with error Connection refused"),
]


@pytest.mark.parametrize(("release", "line"), NCCL_CONNECT, ids=[r for r, _ in NCCL_CONNECT])
def test_an_nccl_connect_failure_names_the_peer_in_every_release(release: str, line: str) -> None:
    assert verdict(HOST + line) == ("interconnect", "unknown", "10.40.2.17")


# The WARN prefix by release (src/misc/utils.cc v2.4.8-1, src/debug.cc since): file:line
# before NCCL WARN; since v2.26.2-1 a '[%F %T] ' timestamp on WARN lines by default
# (NCCL_DEBUG_TIMESTAMP_LEVELS), v2.30 adds '(function)'
NCCL_PREFIXES = [
    "gpu-a-03:4411:4470 [2] include/socket.h:390 NCCL WARN ",
    "[2025-03-02 10:11:12] gpu-a-03:4411:4470 [2] misc/socket.cc:556 NCCL WARN ",
    "[2025-03-02 10:11:12] gpu-a-03:4411:4470 [2] os/linux.cc:302 (socketConnectCheck) NCCL WARN ",
]


@pytest.mark.parametrize("prefix", NCCL_PREFIXES)
def test_every_releases_warn_prefix_keeps_the_peer_and_the_printer(prefix: str) -> None:
    assert verdict(prefix + NCCL_CONNECT[0][1]) == ("interconnect", "unknown", "10.40.2.17")
    ib = NCCL_IB_COMPLETION[0][1]
    assert verdict(prefix + ib) == ("interconnect", "infra", "gpu-a-03")


NCCL_CONNECT_NO_PEER = [
    # v2.18.3-1 .. v2.22.3-1
    "socketStartConnect: exceeded retries (20000)",
    "socketPollConnect: exceeded timeouts (20000)",
    # v2.26.2-1
    "socketPollConnect: connect returned Connection refused, exceeded error retry count (35)",
]


@pytest.mark.parametrize("line", NCCL_CONNECT_NO_PEER)
def test_an_nccl_connect_that_ran_out_of_retries_is_the_network(line: str) -> None:
    assert verdict(HOST + line)[:2] == ("interconnect", "unknown")


NCCL_CLOSED = [
    # v2.4.8-1 .. v2.9.9-1: socketProgressOpt names no peer
    ("2.4-2.9 closed", "Net : Connection closed by remote peer", None),
    ("2.4-2.9 recv", "Call to recv failed : Connection reset by peer", None),
    # v2.10.3-1 .. v2.17: the peer's address, or its name (numericHostForm 0)
    ("2.10 closed", f"Net : Connection closed by remote peer {PEER}", "10.40.2.17"),
    (
        "2.12 closed by name",
        "Net : Connection closed by remote peer gpu-b-07.cluster<43321>",
        "gpu-b-07.cluster",
    ),
    (
        "2.10 recv",
        f"Net : Call to recv from {PEER} failed : Connection reset by peer",
        "10.40.2.17",
    ),
    # v2.18.3-1 .. v2.22.3-1
    (
        "2.18 recv",
        f"socketProgressOpt: Call to recv from {PEER} failed : Connection reset by peer",
        "10.40.2.17",
    ),
    ("2.18 closed", f"socketProgress: Connection closed by remote peer {PEER}", "10.40.2.17"),
    # v2.26.2-1: send or recv
    ("2.26 send", f"socketProgressOpt: Call to send to {PEER} failed : Broken pipe", "10.40.2.17"),
]


@pytest.mark.parametrize(
    ("release", "line", "peer"), NCCL_CLOSED, ids=[r for r, _, _ in NCCL_CLOSED]
)
def test_an_nccl_peer_that_hung_up_is_the_culprit_when_named(
    release: str, line: str, peer: str | None
) -> None:
    assert verdict(HOST + line) == ("interconnect", "unknown", peer)


def test_an_nccl_connect_retried_then_failed_names_the_peer() -> None:
    # v2.7.8-1: INFO every 1000 refused retries, then the WARN with the address
    text = (
        "gpu-a-03:4411:4470 [2] NCCL INFO Call to connect returned Connection refused, retrying\n"
        + HOST
        + f"Connect to {PEER} failed : Connection refused"
    )
    assert verdict(text) == ("interconnect", "unknown", "10.40.2.17")


NCCL_IB_COMPLETION = [
    # src/transport/net_ib.cc v2.4.8-1 .. v2.11.4-1: no peer
    ("2.4-2.11", "NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129"),
    # v2.12.12-1 .. v2.17
    (
        "2.12",
        f"NET/IB : Got completion from peer {PEER} with error 12, opcode 0, len 0, vendor err 129",
    ),
    # v2.18.3-1: the queue pair's GIDs appended
    (
        "2.18",
        f"NET/IB : Got completion from peer {PEER} with error 12, opcode 32767, len 0, vendor "
        "err 129 (Send) localGid ::ffff:10.40.2.16 remoteGid ::ffff:10.40.2.17",
    ),
    # v2.21.5-1 / v2.23.4-1: status= form, then the HCA
    (
        "2.23",
        f"NET/IB: Got completion from peer {PEER} with status=12 opcode=0 len=0 vendor err 129 "
        "(Send) localGid ::ffff:10.40.2.16 remoteGids::ffff:10.40.2.17 hca mlx5_2",
    ),
    # v2.30.7-1: symbolic status and opcode
    (
        "2.30",
        f"NET/IB: Got completion from peer {PEER} with status=IBV_WC_RETRY_EXC_ERR(12) "
        "opcode=IBV_WC_SEND(0) vendor_err=129 localGid ::ffff:10.40.2.16 hca mlx5_2",
    ),
]


@pytest.mark.parametrize(
    ("release", "line"), NCCL_IB_COMPLETION, ids=[r for r, _ in NCCL_IB_COMPLETION]
)
def test_an_nccl_ib_completion_error_is_pinned_to_the_host_that_logged_it(
    release: str, line: str
) -> None:
    assert verdict(HOST + line) == ("interconnect", "infra", "gpu-a-03")


NCCL_SYSTEM_ERROR = [
    # torch 1.5-1.9 (torch/lib/c10d/ProcessGroupNCCL.cpp), NCCL 2.7
    "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled "
    "system error, NCCL version 2.7.8",
    # torch 1.10-1.13: the ncclSystemError explanation on the next line
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, "
    "unhandled system error, NCCL version 2.10.3\nncclSystemError: System call (e.g. socket, "
    "malloc) or external library call failed or device error. It can be also caused by "
    "unexpected exit of a remote peer, you can check NCCL warnings for failure reason and see "
    "if there is connection closure by a peer.",
    # torch 2.x: DistBackendError and NCCL's 'Last error'
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL "
    "version 2.19.3\nncclSystemError: System call (e.g. socket, malloc) or external library "
    "call failed or device error. \nLast error:\nsocketStartConnect: Connect to "
    f"{PEER} failed : Software caused connection abort",
]


@pytest.mark.parametrize("text", NCCL_SYSTEM_ERROR, ids=["torch1.5", "torch1.10", "torch2.x"])
def test_an_nccl_system_error_reads_as_the_network(text: str) -> None:
    assert verdict(text)[:2] == ("interconnect", "unknown")


def test_an_nccl_last_error_names_the_peer_it_could_not_reach() -> None:
    assert verdict(NCCL_SYSTEM_ERROR[2])[2] == "10.40.2.17"


NCCL_CUDA_OOM = [
    # src/include/core.h v2.4.8-1 (no error number), include/alloc.h since
    "include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'",
    # v2.19+: CUDACHECK prints the number
    "include/alloc.h:103 NCCL WARN Cuda failure 2 'out of memory'",
    "include/alloc.h:114 NCCL WARN Failed to CUDA calloc 1048576 bytes",
]


@pytest.mark.parametrize("line", NCCL_CUDA_OOM)
def test_nccl_out_of_gpu_memory_in_every_release_is_the_jobs(line: str) -> None:
    assert verdict("gpu-a-03:4411:4470 [2] " + line)[:2] == ("oom_gpu", "job")


# Gloo's tcp/pair.cc since 045ce1c (2018-11-20, pytorch/gloo): the peer in [addr]:port
GLOO = "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:575] "
GLOO_PEER = [
    "Connection closed by peer [10.40.2.17]:38217",
    "Read error [10.40.2.17]:38217: Connection reset by peer",
    "writev [10.40.2.17]:38217: Broken pipe",
    "Socket unexpectedly closed [10.40.2.17]:38217",
    # pair.cc before 31b1f02 (2023): the connect timeout
    "Connect timeout [10.40.2.17]:38217",
]


@pytest.mark.parametrize("line", GLOO_PEER)
def test_a_gloo_pair_error_names_its_peer(line: str) -> None:
    assert verdict(GLOO + line) == ("interconnect", "unknown", "10.40.2.17")


def test_a_gloo_read_timeout_is_a_collective_that_never_came() -> None:
    assert verdict(GLOO + "Read timeout [10.40.2.17]:38217")[:2] == (
        "nccl_timeout_unknown",
        "unknown",
    )


# ProcessGroupNCCL's watchdog, by release (torch/lib/c10d/ProcessGroupNCCL.cpp until 1.9,
# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp since)
WATCHDOG = [
    # 1.8: WorkNCCL's operator<< without SeqNum, TensorShape kept
    (
        "1.8",
        "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=ALLREDUCE, TensorShape=[1024], Timeout(ms)=1800000) ran for 1800456 "
        "milliseconds before timing out.",
    ),
    # 1.10-1.13: SeqNum, thrown from the watchdog thread
    (
        "1.10",
        "terminate called after throwing an instance of 'std::runtime_error'\n  what():  "
        "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, "
        "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1803270 milliseconds before timing out.",
    ),
    # 2.0-2.1: NumelIn/NumelOut
    (
        "2.1",
        "[E ProcessGroupNCCL.cpp:474] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) "
        "ran for 600321 milliseconds before timing out.",
    ),
    # 2.3: the [PG n Rank r] log prefix
    (
        "2.3",
        "[rank3]:[E ProcessGroupNCCL.cpp:563] [PG 0 Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
        "Timeout(ms)=600000) ran for 600321 milliseconds before timing out.",
    ),
    # 2.5: [PG ID n PG GUID g(name) Rank r]
    (
        "2.5",
        "[rank3]:[E1102 10:11:12.000000 4411 ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID "
        "0(default_pg) Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, "
        "OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600321 "
        "milliseconds before timing out.",
    ),
    # 1.8-1.9: the abort that follows, alone
    ("1.8 abort", "RuntimeError: NCCL communicator was aborted on rank 3."),
    (
        "1.10 abort",
        "RuntimeError: NCCL communicator was aborted on rank 3.  Original reason for failure "
        "was: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, "
        "OpType=ALLGATHER, Timeout(ms)=1800000) ran for 1800880 milliseconds before timing out.",
    ),
    (
        "1.10 teardown",
        "[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data. To avoid this inconsistency, we are taking the entire "
        "process down.",
    ),
    # 2.2: the heartbeat monitor's first wording
    (
        "2.2 stuck",
        "[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 1] ProcessGroupNCCL's watchdog got stuck for "
        "600 seconds without making progress in monitoring enqueued collectives. This typically "
        "indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another "
        "thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.",
    ),
    (
        "2.3 heartbeat",
        "[rank1]:[E ProcessGroupNCCL.cpp:1182] [PG 0 Rank 1] Heartbeat monitor timed out! "
        "Process will be terminated after dumping debug info. workMetaList_.size()=1",
    ),
]


@pytest.mark.parametrize(("release", "text"), WATCHDOG, ids=[r for r, _ in WATCHDOG])
def test_a_collective_timeout_in_every_torch_release_is_unknown(release: str, text: str) -> None:
    assert verdict(text)[:2] == ("nccl_timeout_unknown", "unknown")


# TCPStore and c10d's socket layer, by release
STORE = [
    # 1.0-1.10 (torch/lib/c10d/Utils.hpp SYSCHECK): the bare strerror
    (
        "1.x reset",
        'File "/opt/conda/lib/python3.8/site-packages/torch/distributed/rendezvous.py", line '
        "172, in _tcp_rendezvous_handler\n    store = TCPStore(result.hostname, result.port, "
        "world_size, start_daemon, timeout)\nRuntimeError: Connection reset by peer",
    ),
    ("1.x socket timeout", "RuntimeError: Socket Timeout"),
    # torch/lib/c10d/Utils.cpp 1.5-1.8 and 1.9-1.10 (with the original timeout)
    ("1.3-1.10 connect", "RuntimeError: connect() timed out."),
    ("1.3-1.10 accept", "RuntimeError: waiting for processes to connect has timed out"),
    # 1.12 (torch/csrc/distributed/c10d/socket.cpp) and 2.x
    (
        "1.12 timeout",
        "RuntimeError: The client socket has timed out after 1800s while trying to connect to "
        "(gpu-b-07, 29500).",
    ),
    (
        "2.x refused",
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any "
        "network address of (gpu-b-07, 29500). The client socket has failed to connect to "
        "gpu-b-07:29500 (errno: 111 - Connection refused).",
    ),
    # 2.3+ TCPStore.cpp: the store's own socket, remote= the store server
    (
        "2.3 recv",
        "[W TCPStore.cpp:397] [c10d] recvValue failed on SocketImpl(fd=7, addr=[gpu-a-03]:51234, "
        "remote=[gpu-b-07]:29500): failed to recv, got 0 bytes",
    ),
]


@pytest.mark.parametrize(("release", "text"), STORE, ids=[r for r, _ in STORE])
def test_a_store_socket_failure_in_every_torch_release_is_the_network(
    release: str, text: str
) -> None:
    category, blame, node = verdict(text)
    assert (category, blame) == ("interconnect", "unknown")
    assert node in (None, "gpu-b-07")


def test_a_store_port_already_taken_is_the_jobs() -> None:
    # 1.11: socket.cpp's listen failure lists every address it tried
    text = (
        "RuntimeError: The server socket has failed to listen on any local network address. "
        "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in "
        "use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address "
        "already in use)."
    )
    assert verdict(text)[:2] == ("user_code", "job")


def test_an_old_store_port_already_taken_is_the_jobs() -> None:
    # 1.0-1.10: bind()'s strerror raised from TCPStore's constructor
    text = (
        "    store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)\n"
        "RuntimeError: Address already in use"
    )
    assert verdict(text)[:2] == ("user_code", "job")
