"""Probe set fifteen: the culprit NCCL 2.18-2.26 names, release by release, in its own wording.

Formats from NVIDIA/nccl at the tags cited per format (commit beside each): the WARN prefix of
those releases, src/debug.cc "\\n%s:%d:%d [%d] %s:%d NCCL WARN " (host cut at its first '.',
pid, tid, cudaDev, file, line; no function before 2.27), and since v2.26.2-1 the default
"[%F %T] " timestamp in front of WARN lines (NCCL_DEBUG_TIMESTAMP_LEVELS); INFO lines are
"%s:%d:%d [%d] NCCL INFO ". Peers are ncclSocketToString's "host<port>" (numeric, an IPv6
address bare; socketProgress asks getnameinfo for the peer's name). The corpus policy
(tests/fixtures/corpus/README.md): a socket error's culprit is the peer it names, an IB
work-completion error or async event is pinned to the host that logged it, and a process that
NCCL's RAS declares dead is that process's node (as the ncclras client's "Process %d on node
%s" already is).
"""

from __future__ import annotations

from typing import Any

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import (
    HOSTS,
    IB,
    NAMED_PEERS,
    NET,
    PEERS,
    Fmt,
    check,
    nccl_prefix_values,
    params,
)

_TAGS = {
    "2.18": "v2.18.3-1 ea38312273e5",
    "2.19": "v2.19.3-1 8c6c5951854a",
    "2.21": "v2.21.5-1 ab2b89c4c339",
    "2.23": "v2.23.4-1 68b542363f9a",
    "2.24": "v2.24.3-1 6aae37927840",
    "2.26": "v2.26.2-1 f44ac759fee1",
}
# debug.cc's WARN prefixes of 2.18-2.26: with file:line, the same behind 2.26's timestamp, and
# the bare "[dev] NCCL WARN " that pastes trimmed of file:line show
_WARN = (
    "{host}:{pid}:{tid} [{dev}] {file}:{line} NCCL WARN ",
    "[2026-11-02 04:10:{ss}] {host}:{pid}:{tid} [{dev}] {file}:{line} NCCL WARN ",
    "{host}:{pid}:{tid} [{dev}] NCCL WARN ",
)
_INFO = ("{host}:{pid}:{tid} [{dev}] NCCL INFO ",)
# remote peers named by their address or, for socketProgress, by getnameinfo's name
_IB_PEERS = PEERS
_LINK_LOCAL = (("fe80::ba3f:d2ff:fe11:4455%ib0<50123>", "fe80::ba3f:d2ff:fe11:4455%ib0"),)
RAS_LOST = ("nccl_timeout_unknown", "unknown")


def nccl(
    key: str,
    release: str,
    src: str,
    body: str,
    want: tuple[str | None, str],
    culprit: str | None,
    prefixes: tuple[str, ...] = _WARN,
    **values: Any,
) -> Fmt:
    """One format of `src` as NCCL `release` prints it, behind that release's prefixes."""
    return Fmt(
        key=f"{release}-{key}",
        source=f"NVIDIA/nccl {src}@{_TAGS[release]}",
        template=body + "\n",
        values={**nccl_prefix_values(src, (1295, 1909, 2121)), "ss": ("01", "59"), **values},
        want=want,
        culprit=culprit,
        prefixes=prefixes,
    )


_STATUS = {"st": (12, 5, 13, 4, 10), "op": (0, 1, 128, 2), "v": (129, 244, 0, 136)}
_GIDS_OLD = (
    "",
    " localGid ::ffff:10.4.0.5 remoteGid ::ffff:10.4.0.17",
    " localGid fe80::ba3f:d2ff:fe11:2233 remoteGid fe80::ba3f:d2ff:fe11:4455",
)
_GIDS = (
    "",
    " localGid ::ffff:10.4.0.5 remoteGids::ffff:10.4.0.17",
    " localGid fe80::ba3f:d2ff:fe11:2233 remoteGidsfe80::ba3f:d2ff:fe11:4455",
)
_REQ = ("Send", "Recv", "Flush", "IPut")

IB_COMPLETIONS = [
    # net_ib.cc:1295 (2.18) / :1333 (2.19): "with error %d, opcode %d, len %d, vendor err %d (%s)"
    *(
        nccl(
            "ib-completion",
            rel,
            "src/transport/net_ib.cc",
            "NET/IB : Got completion from peer {peer} with error {st}, opcode {op}, len {n}, "
            "vendor err {v} ({req}){gids}",
            IB,
            "host",
            peer=_IB_PEERS,
            n=(0, 32767, 1048576),
            req=_REQ,
            gids=_GIDS_OLD,
            **_STATUS,
        )
        for rel in ("2.18", "2.19")
    ),
    # net_ib.cc:1909 (2.21): "with status=%d opcode=%d len=%d vendor err %d (%s)" and remoteGids
    nccl(
        "ib-completion",
        "2.21",
        "src/transport/net_ib.cc",
        "NET/IB : Got completion from peer {peer} with status={st} opcode={op} len={n} "
        "vendor err {v} ({req}){gids}",
        IB,
        "host",
        peer=_IB_PEERS + _LINK_LOCAL,
        n=(0, 32767),
        req=_REQ,
        gids=_GIDS,
        **_STATUS,
    ),
    # net_ib.cc:2121 (2.23): "NET/IB: Got completion ..." and the HCA's name at the end
    nccl(
        "ib-completion",
        "2.23",
        "src/transport/net_ib.cc",
        "NET/IB: Got completion from peer {peer} with status={st} opcode={op} len={n} "
        "vendor err {v} ({req}){gids} hca {hca}",
        IB,
        "host",
        peer=_IB_PEERS,
        n=(0, 32767),
        req=_REQ,
        gids=_GIDS,
        hca=("mlx5_0", "mlx5_bond_1", "ibp24s0", "rocep1s0f0", "bnxt_re3"),
        **_STATUS,
    ),
]

_EVENTS = (
    "local catastrophic error",
    "port error",
    "CQ error",
    "local work queue catastrophic error",
)
IB_ASYNC = [
    # net_ib.cc:95 (2.18): no device named
    nccl(
        "ib-async",
        "2.18",
        "src/transport/net_ib.cc",
        "NET/IB : Got async event : {ev}",
        IB,
        "host",
        ev=_EVENTS,
    ),
    # net_ib.cc:101 (2.21): the device and port
    nccl(
        "ib-async",
        "2.21",
        "src/transport/net_ib.cc",
        "NET/IB : {dev_name}:{port} Got async event : {ev}",
        IB,
        "host",
        dev_name=("mlx5_0", "mlx5_bond_1", "ibp24s0"),
        port=(1, 2),
        ev=_EVENTS,
    ),
    # net_ib.cc:140-171 (2.23): fatal events (on a CQ or QP) and the non-fatal port events
    nccl(
        "ib-async-fatal",
        "2.23",
        "src/transport/net_ib.cc",
        "NET/IB : {dev_name}:{port} async fatal event{on}: {ev}",
        IB,
        "host",
        dev_name=("mlx5_0", "mlx5_bond_1", "rocep1s0f0"),
        port=(1, 2),
        on=("", " on CQ (0x55d0c1a2b3c0)", " on QP (0x55d0c1a2b3c0)"),
        ev=("local catastrophic error", "CQ error", "local work queue catastrophic error"),
    ),
    nccl(
        "ib-async-error",
        "2.23",
        "src/transport/net_ib.cc",
        "NET/IB : {dev_name}:{port} Got async error event: {ev}",
        IB,
        "host",
        dev_name=("mlx5_0", "mlx5_bond_1", "rocep1s0f0"),
        port=(1, 2),
        ev=("port error", "path migration request error"),
    ),
]

# the same 2.23-2.26 wording for the informational events: no failure, so no culprit
IB_ASYNC_INFO = [
    nccl(
        "ib-async-error-informational",
        "2.23",
        "src/transport/net_ib.cc",
        "NET/IB : {dev_name}:{port} Got async error event: {ev}",
        (None, "unknown"),
        None,
        dev_name=("mlx5_0", "mlx5_bond_1", "rocep1s0f0"),
        port=(1, 2),
        ev=("port active", "SM change", "P_Key change", "client reregistration", "path migrated"),
    ),
]

_ERRS = ("Connection refused", "No route to host", "Connection timed out", "Network is unreachable")
SOCKETS = [
    # src/misc/socket.cc at 2.18-2.23 (line numbers of 2.21)
    *(
        nccl(
            "socket-closed",
            rel,
            "src/misc/socket.cc",
            "socketProgress: Connection closed by remote peer {peer}",
            NET,
            "peer",
            peer=NAMED_PEERS,
        )
        for rel in ("2.18", "2.21", "2.23")
    ),
    *(
        nccl(
            "socket-recv",
            rel,
            "src/misc/socket.cc",
            "socketProgressOpt: Call to recv from {peer} failed : {err}",
            NET,
            "peer",
            peer=PEERS + _LINK_LOCAL,
            err=("Connection reset by peer", "Connection timed out", "No route to host"),
        )
        for rel in ("2.18", "2.23")
    ),
    *(
        nccl(
            "socket-connect",
            rel,
            "src/misc/socket.cc",
            "socketStartConnect: Connect to {peer} failed : {err}",
            NET,
            "peer",
            peer=PEERS,
            err=_ERRS,
        )
        for rel in ("2.18", "2.23")
    ),
    nccl(
        "socket-poll-connect",
        "2.21",
        "src/misc/socket.cc",
        "socketPollConnect: Connect to {peer} returned {n}({err}) errno 115(Operation now in "
        "progress)",
        NET,
        "peer",
        peer=PEERS,
        n=(111, 113, 110, 101),
        err=_ERRS,
    ),
]

# src/ras/peers.cc rasPeerDeclareDead, src/ras/rasnet.cc (RAS_PEER_DEAD_TIMEOUT), src/ras/ras.cc
# rasMsgHandleBCDeadPeer: INFO(NCCL_RAS, ...) about the process the RAS network lost
RAS = [
    *(
        nccl(
            "ras-declare-dead",
            rel,
            "src/ras/peers.cc",
            "RAS declaring peer {peer} as DEAD; rasDeadPeersHash 0x{hash}",
            RAS_LOST,
            "peer",
            prefixes=_INFO,
            peer=PEERS,
            hash=("5d2a1c0e9f1b2a33", "1f"),
        )
        for rel in ("2.24", "2.26")
    ),
    nccl(
        "ras-connect-retry-timeout",
        "2.26",
        "src/ras/rasnet.cc",
        "RAS connect retry timeout ({s}s) on socket connection with {peer}",
        RAS_LOST,
        "peer",
        prefixes=_INFO,
        peer=PEERS,
        s=(60, 61, 75),
    ),
    nccl(
        "ras-dead-peer-broadcast",
        "2.26",
        "src/ras/ras.cc",
        "RAS handling deadPeer (addr {peer})",
        RAS_LOST,
        "peer",
        prefixes=_INFO,
        peer=PEERS,
    ),
]

FORMATS = IB_COMPLETIONS + IB_ASYNC + IB_ASYNC_INFO + SOCKETS + RAS


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_recent_nccl_line_names_the_culprit_its_release_means(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)


# nccl-tests (NVIDIA/nccl-tests @a0b82b2260cf): src/common.cu testStreamSynchronize's "%s: Test
# timeout (%ds) %s:%d" (a collective hung: no culprit) and src/common.h NCCLCHECK's "%s: Test
# NCCL failure %s:%d '%s / %s'" with ncclGetLastError's text (the WARN without its prefix),
# each followed by TESTCHECK's " .. %s pid %d: Test failure %s:%d"
_NCCL_TESTS = "NVIDIA/nccl-tests src/common.cu@a0b82b2260cf"
_TEST_FAILURE = "\n .. {host} pid {pid}: Test failure common.cu:{line}\n"
NCCL_TESTS = [
    Fmt(
        "nccl-tests-timeout",
        _NCCL_TESTS,
        "{host}: Test timeout ({s}s) common.cu:{line}" + _TEST_FAILURE,
        {"host": HOSTS, "s": (60, 300, 1800), "pid": (3117, 48), "line": (523, 1005)},
        ("nccl_timeout_unknown", "unknown"),
    ),
    Fmt(
        "nccl-tests-remote-closed",
        _NCCL_TESTS,
        "{host}: Test NCCL failure common.cu:{line} 'remote process exited or there was a network "
        "error / socketProgress: Connection closed by remote peer {peer}'" + _TEST_FAILURE,
        {"host": HOSTS, "peer": NAMED_PEERS, "pid": (3117, 48), "line": (1005, 958)},
        NET,
        "peer",
    ),
    Fmt(
        "nccl-tests-ib-completion",
        _NCCL_TESTS,
        "{host}: Test NCCL failure common.cu:{line} 'remote process exited or there was a network "
        "error / NET/IB: Got completion from peer {peer} with status=12 opcode=0 len=0 vendor err "
        "129 (Send) hca mlx5_0'" + _TEST_FAILURE,
        {"host": HOSTS, "peer": PEERS, "pid": (3117, 48), "line": (1005, 958)},
        IB,
        "host",
    ),
]


@pytest.mark.parametrize(("fmt", "text", "node"), params(NCCL_TESTS))
def test_an_nccl_tests_failure_names_the_culprit_nccl_would(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
    if fmt.culprit is None:
        assert explain_text(text).node is None  # a hang names nobody, not the printer


_WATCHDOG = (
    "{h}: [rank{r}]:[E1102 04:10:{r:02d}.118000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID "
    "0(default_pg) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=811, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600046 milliseconds "
    "before timing out.\n"
)


@pytest.mark.parametrize("peer", PEERS)
def test_the_peer_nccl_ras_declares_dead_is_the_culprit_among_timeouts(
    peer: tuple[str, str],
) -> None:
    # every rank's RAS thread broadcasts and logs the same dead peer; the ranks still up time
    # out waiting for it, so the timeouts name nobody and the dead peer is the one to look at
    printed, host = peer
    text = "".join(
        f"{h}:3117:3200 [0] NCCL INFO RAS declaring peer {printed} as DEAD; "
        "rasDeadPeersHash 0x5d2a1c0e9f1b2a33\n" + _WATCHDOG.format(h=h, r=i)
        for i, h in enumerate(HOSTS[:3])
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("nccl_timeout_unknown", "unknown", host)


def test_a_fault_line_outranks_the_peer_nccl_ras_declares_dead() -> None:
    # the RAS line only says which process stopped answering; a host's own fault says why
    text = (
        "gpu-a-01:3117:3200 [0] NCCL INFO RAS declaring peer 10.4.0.17<55321> as DEAD; "
        "rasDeadPeersHash 0x5d2a1c0e9f1b2a33\n"
        "gpu-a-02:3117:3190 [3] NCCL WARN NET/IB : Got completion from peer 10.4.0.5<43117> with "
        "status=12 opcode=0 len=0 vendor err 129 (Send)\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "gpu-a-02")
