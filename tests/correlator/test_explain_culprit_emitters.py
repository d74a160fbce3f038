"""Multi-host culprit reasoning (issue #11), pinned from the emitters' own format strings.

Each log below is made up (hosts gpu-a-NN, addresses in 10.4.0.0/16) but shaped by the format
string its emitter prints, cited beside each test: NCCL (src/misc/socket.cc, src/os/linux.cc,
src/transport/net_ib/p2p.cc, src/bootstrap.cc) and PyTorch's ProcessGroupNCCL.cpp / NCCLUtils.cpp.
Gloo (pair.cc, error.cc, debug_logger.cc) and TCPStore (socket.cpp, TCPStore.cpp) are in
test_explain_culprit_sockets.py; Open MPI / PRRTE, MPICH Hydra and torch elastic in
test_explain_culprit_launchers.py.

What the formats mean for the culprit: a line that names a remote end that went away (closed the
socket, reset it, refused the connection, never answered a connect) points at that remote end,
never at the host that printed it; a timeout points at nobody (every rank of a collective waits
on a neighbour, so the one it names is only the next link of the wait); a hardware line points at
the host that logged it, and so does an IB completion error (the corpus policy), unless several
hosts log one against the same peer.
"""

from __future__ import annotations

from correlator.explain import explain_text

_WATCHDOG = (
    "[rank{r}]:[E1102 04:10:{s:02d}.118000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=811, OpType=ALLREDUCE, NumelIn=1048576, "
    "NumelOut=1048576, Timeout(ms)=600000) ran for 600{s:03d} milliseconds before timing out.\n"
)


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


def _timeouts(*hosts: str) -> str:
    """Every listed host's watchdog timeout, behind pdsh's "host: " prefix."""
    return "".join(f"{h}: " + _WATCHDOG.format(r=i, s=i) for i, h in enumerate(hosts))


# --- NCCL sockets: src/os/linux.cc socketConnectCheck / ncclOsSocketProgressOpt, misc/socket.cc


def test_nccl_connect_retries_exhausted_name_the_peer_that_refused() -> None:
    # "%s: connect to %s returned %s, exceeded error retry count after %d attempts"
    line = (
        "{h}:3117:3190 [0] NCCL WARN ncclOsSocketStartConnect: connect to 10.4.0.17<45678> "
        "returned Connection refused, exceeded error retry count after 35 attempts\n"
    )
    text = line.format(h="gpu-a-01") + line.format(h="gpu-a-02") + _timeouts("gpu-a-03")
    assert _verdict(text) == ("interconnect", "unknown", "10.4.0.17")


def test_nccl_poll_connect_failure_names_the_peer() -> None:
    # "ncclOsSocketPollConnect to %s failed with error %s" (poll() on the connecting socket)
    text = (
        "gpu-a-01:3117:3190 [1] NCCL WARN ncclOsSocketPollConnect to 10.4.0.9<43117> failed "
        "with error Connection refused\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "10.4.0.9")


def test_nccl_older_connect_failure_names_the_peer() -> None:
    # NCCL 2.1x src/misc/socket.cc: "socketStartConnect: Connect to %s failed : %s"
    text = (
        "gpu-a-01:3117:3190 [1] NCCL WARN socketStartConnect: Connect to 10.4.0.9<43117> "
        "failed : Connection refused\n"
        "gpu-a-01:3117:3190 [1] NCCL INFO misc/socket.cc:564 -> 2\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "10.4.0.9")


def test_nccl_recv_failure_names_the_peer_not_the_printer() -> None:
    # "ncclOsSocketProgressOpt: Call to %s %s failed : %s" ("recv from" / "send to");
    # NCCL 2.1x: "socketProgressOpt: Call to recv from %s failed : %s"
    for prefix in ("ncclOsSocketProgressOpt", "socketProgressOpt"):
        text = (
            f"gpu-a-02:77:91 [3] NCCL WARN {prefix}: Call to recv from 10.4.0.9<43117> failed "
            ": Connection timed out\n"
            f"gpu-a-03:78:92 [3] NCCL WARN {prefix}: Call to send to 10.4.0.9<43119> failed : "
            "No route to host\n"
        )
        assert _verdict(text) == ("interconnect", "unknown", "10.4.0.9"), prefix


def test_nccl_peer_forms_ipv6_mapped_and_named_are_read() -> None:
    # ncclSocketToString prints "%s<%s>": host (numeric, or the resolved name for the
    # closed-by-peer WARN) and port; IPv6 addresses are not bracketed
    cases = {
        "fd00:4::17<45678>": "fd00:4::17",
        "::ffff:10.4.0.17<45678>": "10.4.0.17",
        "gpu-a-09.cluster.example<45678>": "gpu-a-09",
    }
    for peer, want in cases.items():
        text = (
            "gpu-a-01:11:12 [0] NCCL WARN socketProgress: Connection closed by remote peer "
            f"{peer}\n"
            "gpu-a-09:21:22 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0\n"
        )
        assert _verdict(text)[2] == want, peer


def test_nccl_loopback_unspecified_or_masked_peer_names_nobody() -> None:
    for peer in ("127.0.0.1<45678>", "localhost<45678>", "0.0.0.0<0>", "10.4.xx.xx<45678>"):
        text = (
            "gpu-a-01:11:12 [0] NCCL WARN socketProgress: Connection closed by remote peer "
            f"{peer}\n" + _timeouts("gpu-a-01", "gpu-a-02")
        )
        assert _verdict(text) == ("interconnect", "unknown", None), peer


def test_a_named_peer_that_itself_reports_losing_a_peer_is_a_victim_not_the_culprit() -> None:
    # gpu-a-03 died; gpu-a-02 lost it and aborted; gpu-a-01 then lost gpu-a-02. gpu-a-02's own
    # closed-by-peer line shows it was alive to see gpu-a-03 go: the first link is gpu-a-03.
    text = (
        "gpu-a-02:21:22 [0] NCCL WARN socketProgress: Connection closed by remote peer "
        "gpu-a-03<50112>\n"
        "gpu-a-01:11:12 [0] NCCL WARN socketProgress: Connection closed by remote peer "
        "gpu-a-02<50111>\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "gpu-a-03")


def test_of_two_hosts_that_each_lost_the_other_the_one_most_ranks_lost_is_named() -> None:
    # a two-node job: one rank on gpu-a-02 died, gpu-a-01's four ranks lost it, and one of
    # gpu-a-02's surviving ranks then lost gpu-a-01's aborted ranks: both are victims of each
    # other, so the counts decide (gpu-a-02, named four times)
    closed = "{h}:{p}:2 [0] NCCL WARN socketProgress: Connection closed by remote peer {n}<5011>\n"
    text = "".join(closed.format(h="gpu-a-01", p=10 + r, n="gpu-a-02") for r in range(4))
    text += closed.format(h="gpu-a-02", p=20, n="gpu-a-01")
    assert _verdict(text) == ("interconnect", "unknown", "gpu-a-02")


def test_two_victims_naming_two_different_peers_once_each_name_nobody() -> None:
    # Each line says only that its remote end went away; two ends went, and neither line is
    # shown to come first, so the text does not single one out.
    text = (
        "gpu-a-01:11:12 [0] NCCL WARN socketProgress: Connection closed by remote peer "
        "gpu-a-07<50112>\n"
        "gpu-a-02:21:22 [0] NCCL WARN socketProgress: Connection closed by remote peer "
        "gpu-a-08<50111>\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", None)


def test_of_two_peers_named_once_each_the_one_lost_first_by_the_texts_clock_is_named() -> None:
    # The first connection lost is to the rank that went first; a loss a second or less later
    # cannot be ordered across hosts' clocks, so then nobody is named.
    line = (
        "[2026-11-02 04:10:{s}] {h}:11:12 [0] NCCL WARN socketProgress: Connection closed by "
        "remote peer {p}<50112>\n"
    )
    text = line.format(s="41", h="gpu-a-02", p="gpu-a-08") + line.format(
        s="07", h="gpu-a-01", p="gpu-a-07"
    )
    assert _verdict(text) == ("interconnect", "unknown", "gpu-a-07")
    close = line.format(s="07", h="gpu-a-02", p="gpu-a-08") + line.format(
        s="07", h="gpu-a-01", p="gpu-a-07"
    )
    assert _verdict(close)[2] is None


def test_the_peer_that_most_victims_name_is_the_culprit() -> None:
    closed = "{h}:1:2 [0] NCCL WARN socketProgress: Connection closed by remote peer {p}<5011>\n"
    text = "".join(
        closed.format(h=h, p=p)
        for h, p in (("gpu-a-01", "gpu-a-04"), ("gpu-a-02", "gpu-a-04"), ("gpu-a-03", "gpu-a-05"))
    )
    assert _verdict(text)[2] == "gpu-a-04"


# --- NCCL IB: net_ib/p2p.cc "NET/IB: Got completion from peer %s with status=%s(%d) ..."

_IB = (
    "{h}:4545:4601 [2] NCCL WARN NET/IB: Got completion from peer {p}<46011> with "
    "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129  localGid "
    "::ffff:{me} remoteGids::ffff:{p} hca mlx5_2\n"
)


def test_an_ib_completion_error_is_pinned_to_the_one_host_that_logged_it() -> None:
    text = _IB.format(h="gpu-a-01", p="10.4.0.17", me="10.4.0.11") + _timeouts(
        "gpu-a-02", "gpu-a-03"
    )
    assert _verdict(text) == ("interconnect", "infra", "gpu-a-01")


def test_ib_completion_errors_of_several_hosts_against_one_peer_name_that_peer() -> None:
    text = _IB.format(h="gpu-a-01", p="10.4.0.17", me="10.4.0.11") + _IB.format(
        h="gpu-a-02", p="10.4.0.17", me="10.4.0.12"
    )
    assert _verdict(text) == ("interconnect", "infra", "10.4.0.17")


def test_older_ib_completion_formats_are_read_the_same() -> None:
    # NCCL 2.19-2.2x net_ib.cc: "NET/IB : Got completion from peer %s with status=%d opcode=%d
    # len=%d vendor err %d (%s)%s%s%s%s"; 2.1x: "... with error %d, opcode %d, len %d, vendor
    # err %d"
    for tail in (
        "status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.4.0.15 "
        "remoteGids::ffff:10.4.0.17",
        "error 12, opcode 0, len 0, vendor err 129",
    ):
        text = (
            f"gpu-a-05:9:10 [0] NCCL WARN NET/IB : Got completion from peer 10.4.0.17<5411> with "
            f"{tail}\n" + _timeouts("gpu-a-01", "gpu-a-02")
        )
        assert _verdict(text) == ("interconnect", "infra", "gpu-a-05"), tail


# --- PyTorch: NCCLUtils getNcclErrorDetailStr ("Last error:\n" + ncclGetLastError)


def test_a_remote_error_whose_last_error_names_the_peer_names_it() -> None:
    text = (
        "gpu-a-01: [rank4]:[E1102 04:10:01.000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID "
        "0(default_pg) Rank 4] Process group watchdog thread terminated with exception: NCCL "
        "error: remote process exited or there was a network error, NCCL version 2.21.5\n"
        "gpu-a-01: ncclRemoteError: A call failed possibly due to a network error or a remote "
        "process exiting prematurely.\n"
        "gpu-a-01: Last error:\n"
        "gpu-a-01: socketProgress: Connection closed by remote peer gpu-a-05<54321>\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "gpu-a-05")


def test_a_remote_error_without_a_named_peer_names_nobody() -> None:
    text = (
        "gpu-a-01: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:"
        "1970, remote process exited or there was a network error, NCCL version 2.21.5\n"
        "gpu-a-02: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:"
        "1970, remote process exited or there was a network error, NCCL version 2.21.5\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", None)


def test_hardware_on_one_host_beats_the_remote_errors_and_timeouts_of_the_others() -> None:
    text = (
        "Nov  2 04:09:41 gpu-a-05 kernel: NVRM: Xid (PCI:0000:9b:00): 79, pid=8812, "
        "name=python, GPU has fallen off the bus.\n"
        "gpu-a-01:11:12 [0] NCCL WARN socketProgress: Connection closed by remote peer "
        "10.4.0.15<50112>\n" + _timeouts("gpu-a-02", "gpu-a-03")
    )
    assert _verdict(text) == ("gpu_hardware", "node", "gpu-a-05")


def test_an_ecc_error_in_one_hosts_nccl_warn_beats_the_timeouts_of_the_others() -> None:
    text = _timeouts("gpu-a-01", "gpu-a-02") + (
        "gpu-a-03:31:32 [5] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'\n"
    )
    assert _verdict(text) == ("gpu_hardware", "node", "gpu-a-03")


# --- timeouts only: ProcessGroupNCCL watchdog / heartbeat monitor, Gloo unbound_buffer.cc


def test_only_timeouts_from_many_hosts_name_no_culprit() -> None:
    text = _timeouts("gpu-a-01", "gpu-a-02", "gpu-a-03", "gpu-a-04")
    assert _verdict(text) == ("nccl_timeout_unknown", "unknown", None)


def test_heartbeat_and_dump_signal_lines_from_many_hosts_name_no_culprit() -> None:
    text = "".join(
        f"{h}: [rank{r}]:[E1102 04:20:00.000 ProcessGroupNCCL.cpp:1404] [PG ID 0 PG GUID 0 "
        f"Rank {r}] {msg}\n"
        for r, (h, msg) in enumerate(
            (
                (
                    "gpu-a-01",
                    "Received a dump signal due to a collective timeout from this "
                    "local rank and we will try our best to dump the debug info.",
                ),
                (
                    "gpu-a-02",
                    "Observed flight recorder dump signal from another rank via TCPStore.",
                ),
                (
                    "gpu-a-03",
                    "Heartbeat monitor timed out! Process will be terminated after "
                    "dumping debug info. workMetaList_.size()=1",
                ),
            )
        )
    )
    assert _verdict(text) == ("nccl_timeout_unknown", "unknown", None)


def test_gloo_timeouts_from_many_hosts_name_no_culprit_even_when_they_name_a_pair() -> None:
    # unbound_buffer.cc "Timed out waiting %dms for recv operation to complete"; pair.cc
    # "Read timeout [%s]:%d": the named pair is the next link of the wait, not shown at fault
    text = (
        "gpu-a-01: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
        "Timed out waiting 1800000ms for recv operation to complete\n"
        "gpu-a-02: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:523] Read "
        "timeout [10.4.0.13]:61455\n"
    )
    assert _verdict(text) == ("nccl_timeout_unknown", "unknown", None)


def test_a_peer_named_by_address_is_a_victim_when_its_own_init_line_owns_that_address() -> None:
    # bootstrap.cc "Bootstrap: Using [%d]%s:%s" (older "Bootstrap : Using %s:%s") and
    # net_ib/init.cc "NET/IB : Using%s %s; OOB %s:%s" tell which host owns 10.4.0.12: gpu-a-02,
    # which itself lost 10.4.0.13, so the chain starts at 10.4.0.13
    text = (
        "gpu-a-01:11:11 [0] NCCL INFO Bootstrap : Using eth0:10.4.0.11<0>\n"
        "gpu-a-02:21:21 [0] NCCL INFO Bootstrap: Using [0]eth0:10.4.0.12<0>\n"
        "gpu-a-02:21:21 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.4.0.12<0>\n"
        "gpu-a-02:21:22 [0] NCCL WARN socketProgress: Connection closed by remote peer "
        "10.4.0.13<50112>\n"
        "gpu-a-01:11:12 [0] NCCL WARN socketProgress: Connection closed by remote peer "
        "10.4.0.12<50111>\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "10.4.0.13")
