"""Multi-host culprit reasoning (issue #11) for Gloo's and TCPStore's socket errors.

Made-up logs (hosts gpu-a-NN, addresses in 10.4.0.0/16) shaped by the format strings of Gloo
(pytorch/gloo gloo/transport/tcp/pair.cc, error.cc, debug_logger.cc, address.cc) and PyTorch c10d
(torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp). A line naming the remote end of a socket
that failed points at that remote end, never at the host that printed it (nor at its local=
address); loopback and masked remotes name nobody.
"""

from __future__ import annotations

from correlator.explain import explain_text

# a bystander: another host's ProcessGroupNCCL watchdog timeout
_TIMEOUT = (
    "gpu-a-02: [rank2]:[E1102 04:10:01.118000 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=811, OpType=ALLREDUCE) ran for 600001 "
    "milliseconds before timing out.\n"
)


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


# --- Gloo: gloo/transport/tcp/pair.cc, error.cc, debug_logger.cc; Address::str() is
# "[%s]:%d" (the port as stored, not byte-swapped back) with "$%ld" when a sequence is set


def test_gloo_closed_reset_and_broken_pipe_lines_name_the_peer() -> None:
    lines = (
        "Connection closed by peer [10.4.0.17]:8594. This is typically caused by a remote "
        "worker crashing.",  # readHandler, recv() == 0
        "Read error [10.4.0.17]:8594: Connection reset by peer",  # read() == -1
        "writev [10.4.0.17]:8594: Broken pipe",  # write() == -1
        "Socket unexpectedly closed [10.4.0.17]:8594$3",  # setSync on a CLOSED pair
    )
    for line in lines:
        text = (
            "gpu-a-01: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
            f"{line}\n" + _TIMEOUT
        )
        assert _verdict(text) == ("interconnect", "unknown", "10.4.0.17"), line


def test_gloo_ipv6_peer_is_read_without_its_brackets() -> None:
    text = "RuntimeError: [pair.cc:598] Connection closed by peer [fd00:4::17]:8594\n"
    assert _verdict(text)[2] == "fd00:4::17"


def test_gloo_connect_refused_names_the_remote_not_the_local_address() -> None:
    # debug_logger.cc: "failed to connect, willRetry=%d, retry=%d, retryLimit=%d, rank=%d,
    # size=%d, local=%s, remote=%s, error=%s"; helpers.h: SystemError "SO_ERROR: %s, remote=%s"
    text = (
        "gpu-a-01: [E1102 04:00:01.000 debug_logger.cc:9] failed to connect, willRetry=0, "
        "retry=3, retryLimit=3, rank=0, size=4, local=[10.4.0.11]:51234, remote=[10.4.0.17]"
        ":29500, error=SO_ERROR: Connection refused, remote=[10.4.0.17]:29500\n"
        "gpu-a-01: RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/"
        "transport/tcp/pair.cc:144] timed out connecting: SO_ERROR: Connection refused, "
        "remote=[10.4.0.17]:29500\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "10.4.0.17")


def test_gloo_system_errors_name_their_remote_and_a_retried_connect_names_nobody() -> None:
    # error.cc SystemError "%s: %s, remote=%s", ShortReadError "short read: got %d bytes while
    # expecting to read %d bytes, remote=%s"; debug_logger.cc with willRetry=0 is the last try
    for line in (
        "read: Connection reset by peer, remote=[10.4.0.17]:8594",
        "short read: got 0 bytes while expecting to read 8 bytes, remote=[10.4.0.17]:8594",
        "failed to connect, willRetry=0, retry=3, retryLimit=3, rank=1, size=4, "
        "local=[10.4.0.11]:51234, remote=[10.4.0.17]:29500, "
        "error=SO_ERROR: Connection refused, remote=[10.4.0.17]:29500",
    ):
        assert _verdict(f"gpu-a-01: {line}\n")[2] == "10.4.0.17", line
    retried = (
        "gpu-a-01: failed to connect, willRetry=1, retry=1, retryLimit=3, rank=1, size=4, "
        "local=[10.4.0.11]:51234, remote=[10.4.0.17]:29500, error=SO_ERROR: Connection "
        "refused, remote=[10.4.0.17]:29500\n"
    )
    assert _verdict(retried)[1:] == ("unknown", None)


def test_gloo_connect_full_mesh_without_a_remote_names_nobody() -> None:
    text = (
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/"
        "tcp/pair.cc:144] no error\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", None)


# --- PyTorch TCPStore / socket.cpp


def test_tcpstore_connect_failures_name_the_store_host() -> None:
    lines = (
        # socket.cpp: "The client socket has failed to connect to [{}]:{} (errno: {} - {})."
        "[W1102 04:00:01.000 socket.cpp:663] [c10d] The client socket has failed to connect "
        "to [gpu-a-01]:29500 (errno: 111 - Connection refused).",
        # "The client socket has failed to connect to any network address of ({}, {})."
        "[E1102 04:00:01.000 socket.cpp:860] [c10d] The client socket has failed to connect "
        "to any network address of (gpu-a-01, 29500).",
        # TCPStore.cpp: "TCP client failed to connect/validate to host {}:{} - retrying ..."
        "[W1102 04:00:01.000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate "
        "to host gpu-a-01:29500 - retrying (try=0, timeout=1800000ms, delay=487ms): "
        "Connection reset by peer",
    )
    for line in lines:
        text = f"gpu-a-02: {line}\ngpu-a-03: {line}\n"
        assert _verdict(text) == ("interconnect", "unknown", "gpu-a-01"), line


def test_tcpstore_socket_errors_name_the_remote_end_in_any_spelling() -> None:
    # TCPStore.cpp: "{} failed on SocketImpl(fd={}, addr={}, remote={}): {}"; the address is
    # "[host]:port", "host:port" or an IPv4-mapped IPv6 address, as the resolver gave it
    for remote, want in (
        ("10.4.0.9:5000", "10.4.0.9"),
        ("[gpu-a-01]:29500", "gpu-a-01"),
        ("[::ffff:10.4.0.9]:29500", "10.4.0.9"),
    ):
        text = (
            "gpu-a-02: [rank15]:[W1102 04:00:01.000 TCPStore.cpp:106] [c10d] sendBytes failed "
            f"on SocketImpl(fd=102, addr=gpu-a-02:33978, remote={remote}): Broken pipe\n"
        )
        assert _verdict(text) == ("interconnect", "unknown", want), remote


def test_tcpstore_loopback_store_names_nobody() -> None:
    for remote in ("[localhost]:29500", "127.0.0.1:29500", "[::ffff:127.0.0.1]:29500"):
        text = (
            "[W1102 04:00:01.000 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=73,"
            f" addr=[localhost]:46764, remote={remote}): Failed to recv, got 0 bytes.\n"
        )
        assert _verdict(text) == ("interconnect", "unknown", None), remote


def test_a_store_error_that_names_no_peer_names_nobody() -> None:
    text = (
        "gpu-a-01: torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection "
        "was likely closed. Did the remote server shutdown or crash?\n"
        "gpu-a-02: torch.distributed.DistNetworkError: Failed to recv, got 0 bytes.\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", None)
