"""Probe set fifteen: which host PyTorch 2.2-2.6's ProcessGroupNCCL, c10d and TCPStore name.

Formats (the commit of the stored source beside each):
- ProcessGroupNCCL.cpp (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
  @cf1380dfb6) behind glog's "[rank%d]:[E%m%d %T.%f ProcessGroupNCCL.cpp:%d] " and logPrefix()'s
  "[PG ID %d PG GUID %s Rank %d] " (2.4+; "[PG %d Rank %d] " in 2.3, "[PG %d (%s) Rank %d] "
  in between): getNCCLWatchdogTimeoutErrorMsg "Received a dump signal due to a collective
  timeout from %s and we will try our best to dump the debug info. ..." where %s is " rank %d"
  (so two spaces) or "this local rank" (the rank that timed out first, not a faulty host);
  "Observed flight recorder dump signal from another rank via TCPStore."; "Timeout at NCCL
  work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d."; "Exception (either an
  error or timeout) detected by watchdog at work: %d, ..."; " failure detected by watchdog at
  work sequence id: %d PG status: %s"; broadcastDumpSignal's "First PG on this rank to signal
  dumping."; "ProcessGroupNCCL's watchdog got stuck for %d seconds without making progress
  ...": each a timeout, naming no culprit;
- socket.cpp (torch/csrc/distributed/c10d/socket.cpp @8cf1b8e394) "[c10d] The client socket
  cannot be initialized to connect to %s (errno: %d - %s)." (::socket() failed on the printer,
  e.g. no IPv6: names no culprit), and DistNetworkError's "The client socket has timed out
  after %s while trying to connect to (%s, %d)." (the store's host);
- TCPStore.cpp (@b874478480) "[c10d] %s failed on SocketImpl(fd=%d, addr=%s, remote=%s): %s"
  for sendBytes / recvVector / recvValue / recvValueWithTimeout, the remote being the store
  server.
Hosts: pdsh's "host: " in front (the printer, never the culprit of a timeout).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

_PG = "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp@cf1380dfb6"
_SOCKET = "pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp@8cf1b8e394"
_STORE = "pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp@b874478480"
_GLOG = ("{host}: [rank{rank}]:[E{md} {hms}.{us} ProcessGroupNCCL.cpp:{line}] ",)
# logPrefix() of 2.4+, 2.3 and between (the rank is the glog prefix's, so a value set holds)
_PG_PREFIX = (
    "[PG ID 0 PG GUID 0(default_pg) Rank ",
    "[PG 0 Rank ",
    "[PG 0 (default_pg) Rank ",
    "[PG ID 2 PG GUID 3 Rank ",
)
_CLOCK = {
    "md": ("1102", "0312"),
    "hms": ("04:10:01", "23:59:59"),
    "us": ("511201204", "118000"),
    "line": (1987, 1537, 1709, 1834),
}
TIMEOUT = ("nccl_timeout_unknown", "unknown")
NET = ("interconnect", "unknown")


def pg(key: str, body: str, **values: tuple[object, ...]) -> Fmt:
    """A ProcessGroupNCCL timeout line behind glog's and logPrefix()'s prefixes."""
    return Fmt(
        key,
        _PG,
        "{pg}{rank}] " + body + "\n",
        {"host": HOSTS, "rank": (0, 3, 7, 63), "pg": _PG_PREFIX, **_CLOCK, **values},
        TIMEOUT,
        prefixes=_GLOG,
    )


NO_CULPRIT = [
    pg(
        "pg-dump-signal",
        "Received a dump signal due to a collective timeout from {src} and we will try our best "
        "to dump the debug info. Last enqueued NCCL work: {a}, last completed NCCL work: {b}.This "
        "is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across "
        "ranks, the order of collectives is not same for all ranks or the scheduled collective, "
        "for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other "
        "reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ",
        # c10::str(" rank ", timeOutRank) after "from ": two spaces; one where a paste folded them
        src=(" rank 7", "this local rank", " rank 0", "rank 12"),
        a=(56116, 1, 20589),
        b=(56115, -1, 20584),
    ),
    pg(
        "pg-timeout-at",
        "Timeout at NCCL work: {a}, last enqueued NCCL work: {a}, last completed NCCL work: {b}.",
        a=(6463, 1, 31),
        b=(6462, 0, 30),
    ),
    pg(
        "pg-exception-detected",
        "Exception (either an error or timeout) detected by watchdog at work: {a}, last enqueued "
        "NCCL work: {a}, last completed NCCL work: {b}.",
        a=(6463, 1, 31),
        b=(6462, 0, 30),
    ),
    pg(
        "pg-first-to-signal",
        "First PG on this rank to signal dumping.",
    ),
    pg(
        "pg-failure-detected",
        " failure detected by watchdog at work sequence id: {a} PG status: last enqueued work: "
        "{a}, last completed work: {b}",
        a=(78, 5, 57),
        b=(77, 4, 56),
    ),
    pg(
        "pg-watchdog-stuck",
        "ProcessGroupNCCL's watchdog got stuck for {s} seconds without making progress in "
        "monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., "
        "CudaEventDestroy) hang blocking the watchdog, and could be triggered by another thread "
        "holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other "
        "deadlock-prone behaviors.",
        s=(480, 600, 1200),
    ),
]


@pytest.mark.parametrize(("fmt", "text", "node"), params(NO_CULPRIT))
def test_a_rank_that_only_timed_out_names_no_culprit(fmt: Fmt, text: str, node: None) -> None:
    # "from rank 7" is the rank whose watchdog fired first, itself only waiting on a peer
    check(fmt, text, node)
    got = explain_text(text)
    assert got.node is None, (fmt.source, text, got.node)


def test_dump_signals_from_several_hosts_name_none_of_them() -> None:
    # every rank relays the same dump signal; the rank it names timed out first, nothing more
    body = (
        "[PG ID 0 PG GUID 0(default_pg) Rank {r}] Received a dump signal due to a collective "
        "timeout from rank 7 and we will try our best to dump the debug info. Last enqueued NCCL "
        "work: 56116, last completed NCCL work: 56115."
    )
    text = (
        "".join(
            f"{h}: [rank{r}]:[E1102 04:10:01.5 ProcessGroupNCCL.cpp:1987] "
            + body.format(r=r)
            + "\n"
            for r, h in enumerate(HOSTS[:4])
        )
        + f"{HOSTS[0]}: [rank0]:[E1102 04:10:01.6 ProcessGroupNCCL.cpp:1922] [PG ID 0 PG GUID "
        "0(default_pg) Rank 0] Observed flight recorder dump signal from another rank via "
        "TCPStore.\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("nccl_timeout_unknown", "unknown", None)


# (as c10d prints it, the host): socket.cpp formats an address "[%s]:%d"
_STORE_PEERS = (
    ("[gpu-b-01]:29500", "gpu-b-01"),
    ("[10.4.0.17]:29500", "10.4.0.17"),
    ("[2001:db8:12::17]:43117", "2001:db8:12::17"),
    ("[master-0.job-svc.ns.svc.cluster.local]:23456", "master-0.job-svc.ns.svc.cluster.local"),
    ("[::ffff:10.4.0.21]:50810", "10.4.0.21"),
    ("[ip-10-1-2-4.ec2.internal]:29400", "ip-10-1-2-4.ec2.internal"),
)
_STORE_HOSTS = tuple(h for _, h in _STORE_PEERS)

STORE = [
    Fmt(
        "tcpstore-recv-zero",
        _STORE,
        "[W{md} {hms}.{us} TCPStore.cpp:{line}] [c10d] {call} failed on SocketImpl(fd={fd}, "
        "addr=[{host}]:{port}, remote={peer}): failed to recv, got 0 bytes. Connection was likely "
        "closed. Did the remote server shutdown or crash?\n",
        {
            **_CLOCK,
            "host": HOSTS,
            "call": ("recvValue", "recvVector", "recvValueWithTimeout", "sendBytes"),
            "fd": (7, 102),
            "port": (33978, 51234),
            "peer": _STORE_PEERS,
        },
        NET,
        "peer",
    ),
    Fmt(
        "c10d-connect-timed-out",
        _SOCKET,
        "torch.distributed.DistNetworkError: The client socket has timed out after {t} while "
        "trying to connect to ({store}, {port}).\n",
        {"t": ("600000ms", "1800s", "900s"), "store": _STORE_HOSTS, "port": (29500, 29400)},
        NET,
        "store",
    ),
]


@pytest.mark.parametrize(("fmt", "text", "node"), params(STORE))
def test_a_store_client_error_names_the_store_server(fmt: Fmt, text: str, node: str) -> None:
    check(fmt, text, node)


@pytest.mark.parametrize(("peer", "host"), _STORE_PEERS)
def test_a_client_socket_that_could_not_be_created_names_no_culprit(peer: str, host: str) -> None:
    # ::socket() failed on the printer (errno 97: no IPv6 there): the store was never asked
    text = (
        f"[W1102 04:10:01.295093976 socket.cpp:767] [c10d] The client socket cannot be "
        f"initialized to connect to {peer} (errno: 97 - Address family not supported by "
        "protocol).\n"
    )
    assert explain_text(text).node is None
