"""Round five of the emitter families: messages that name a peer or a host, read from the
emitters' own sources, and which host `explain` names for them.

Each line is an emitter's format string (quoted in its family's `sources`) filled in with made-up
values, never a corpus case: NCCL's IB completion error (src/transport/net_ib/p2p.cc, older
net_ib.cc), the ncclras client's Errors section (src/ras/client_support.cc) and slurmstepd's
SIG_UME / SIG_FAILURE banners (src/slurmd/slurmstepd/req.c).
"""

from __future__ import annotations

from correlator.explain import explain_text
from correlator.rules import classify_text
from correlator.taxonomy import Blame, Category

_IB_NEW = (
    "{host}:1:2 [0] transport/net_ib/p2p.cc:688 NCCL WARN NET/IB: Got completion from peer "
    "{peer}<1234> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 "
    "localGid ::ffff:10.0.0.1 remoteGids ::ffff:{peer} hca mlx5_0\n"
)
_IB_OLD = (
    "{host}:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
    "{peer}<1234> with error 12, opcode 0, len 0, vendor err 129 (Recv)\n"
)


def test_an_ib_completion_error_keeps_the_printer_as_suspect_and_remembers_the_peer() -> None:
    for fmt in (_IB_NEW, _IB_OLD):
        line = fmt.format(host="gpu-01", peer="10.0.0.9")
        v = classify_text(line)
        assert v is not None and (v.category, v.blame) == (Category.INTERCONNECT, Blame.INFRA)
        assert v.at_printer and v.culprit is None and v.peer_named == "10.0.0.9"
        assert explain_text(line).node == "gpu-01"


def test_several_hosts_failing_towards_one_peer_name_that_peer() -> None:
    for fmt in (_IB_NEW, _IB_OLD):
        text = fmt.format(host="gpu-01", peer="10.0.0.9") + fmt.format(
            host="gpu-02", peer="10.0.0.9"
        )
        got = explain_text(text)
        assert (got.category, got.blame, got.node) == ("interconnect", "infra", "10.0.0.9")


def test_several_hosts_failing_towards_different_peers_name_nobody() -> None:
    text = _IB_OLD.format(host="gpu-01", peer="10.0.0.9") + _IB_OLD.format(
        host="gpu-03", peer="10.0.0.7"
    )
    assert explain_text(text).node is None


def test_a_link_local_peer_from_its_port_is_the_shared_culprit_with_its_zone() -> None:
    # NCCL prints an IPv6 link-local peer with the interface it is reached by ("fe80::...%ib0");
    # its interface identifier is the peer port's own (RFC 4291 appendix A, RFC 4391 8), so it
    # names that port; round five read every fe80::/10 address as no host at all
    text = _IB_OLD.format(host="gpu-01", peer="fe80::966d:ae03:8b:df78%ib0") + _IB_OLD.format(
        host="gpu-02", peer="fe80::966d:ae03:8b:df78%ib0"
    )
    assert explain_text(text).node == "fe80::966d:ae03:8b:df78%ib0"


def test_a_hand_set_link_local_peer_is_never_the_shared_culprit() -> None:
    # "fe80::1" (a gateway's, set by hand) is the same address on every link: no one host
    text = _IB_OLD.format(host="gpu-01", peer="fe80::1%ib0") + _IB_OLD.format(
        host="gpu-02", peer="fe80::1%ib0"
    )
    assert explain_text(text).node is None


_RAS = (
    "Errors\n"
    "======\n"
    "\n"
    "DEAD\n"
    "  1 job process is considered dead (unreachable via the RAS network)\n"
    "  Process 34567 on node gpu-07 managing GPUs 0-7\n"
)


def test_ncclras_names_the_node_of_the_dead_process_not_the_host_that_asked() -> None:
    got = explain_text("alice@gpu-01:~$ ncclras\n" + _RAS)
    assert (got.category, got.blame, got.node) == ("nccl_timeout_unknown", "unknown", "gpu-07")


def test_a_watchdog_timeout_beside_ncclras_names_the_process_that_did_not_answer() -> None:
    text = (
        "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600060 milliseconds\n"
        "INCOMPLETE\n"
        "  Missing communicator data from 1 job process\n"
        "  Process 34567 on node gpu-07 managing GPU 3\n"
    )
    got = explain_text(text)
    assert (got.category, got.node) == ("nccl_timeout_unknown", "gpu-07")


def test_slurms_uncorrectable_memory_banner_drains_the_node_it_names() -> None:
    for entity in ("JOB 7", "STEP 7.0"):
        got = explain_text(
            f"slurmstepd: error: *** {entity} ON node1 UNCORRECTABLE MEMORY ERROR AT "
            "2026-09-21T10:00:00 ***\n"
        )
        assert (got.category, got.blame, got.node) == ("node", "node", "node1")


def test_slurms_failed_banner_is_a_consequence_that_yields_to_the_cause() -> None:
    failed = (
        "slurmstepd: error: *** JOB 7 ON node1 FAILED (non-zero exit code or other failure "
        "mode) ***\n"
    )
    alone = explain_text(failed)
    assert (alone.category, alone.blame) == (None, "unknown")
    assert "failure mode" in alone.explanation
    oom = (
        "slurmstepd: error: Detected 1 oom_kill event in StepId=7.0. Some of the step tasks have "
        "been OOM Killed.\n"
    )
    got = explain_text(oom + failed)
    assert (got.category, got.blame, got.node) == ("oom_host", "job", "node1")


def test_a_remote_error_whose_last_error_is_an_ib_completion_is_the_fabric_fault() -> None:
    # PyTorch's NCCL error text (torch/csrc/distributed/c10d/NCCLUtils: the error string, then
    # ncclGetLastError's "Last error:"), on one line as some terminals print the what() message
    # and on separate lines as NCCL 2.20+ builds it
    last = (
        "NET/IB : Got completion from peer 10.0.0.9<39138> with error 12, opcode 0, len 0, "
        "vendor err 129"
    )
    head = (
        "what(): NCCL error: remote process exited or there was a network error, NCCL version "
        "2.14.3"
    )
    remote = (
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely."
    )
    for text in (
        f"{head} {remote} Last error: {last}\n",
        f"{head}\n{remote}\nLast error:\n{last}\n",
    ):
        got = explain_text(text)
        assert (got.category, got.blame, got.node) == ("interconnect", "infra", None), text


def test_c10d_bare_socket_errors_are_a_network_symptom_not_the_jobs_bug() -> None:
    # torch/lib/c10d/Utils.hpp SYSCHECK: std::system_error(errno) -> strerror, EAGAIN ->
    # "Socket Timeout"; Python shows them as a bare RuntimeError
    for msg in ("Connection reset by peer", "Broken pipe", "Connection refused", "Socket Timeout"):
        got = explain_text(f"[rank1]: RuntimeError: {msg}\n")
        assert (got.category, got.blame, got.node) == ("interconnect", "unknown", None), msg
    # a program's own error that merely mentions a socket stays the program's
    got = explain_text("RuntimeError: Connection reset by peer while downloading weights\n")
    assert got.category != "interconnect"
