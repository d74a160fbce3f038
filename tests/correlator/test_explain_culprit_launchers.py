"""Multi-host culprit reasoning (issue #11) for the launchers that report another host's rank.

Made-up logs shaped by the format strings of Open MPI 4.1 (orte/tools/orterun/help-orterun.txt,
orte/mca/errmgr/base/help-errmgr-base.txt), PRRTE (src/mca/schizo/prte/help-prun.txt,
src/mca/errmgr/base/help-errmgr-base.txt), MPICH Hydra's termination block and torch elastic's
ChildFailedError table. The launcher runs on one host and names the node where the rank died:
that node is the culprit, never the host that ran the launcher.
"""

from __future__ import annotations

from correlator.explain import explain_text

_PROMPT = "[alice@login-01 run]$ mpirun -np 16 --hostfile hosts ./train\n"


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


def test_orterun_names_the_node_where_the_rank_died_not_the_launching_host() -> None:
    # "%s noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s)."
    text = _PROMPT + (
        "mpirun noticed that process rank 5 with PID 0 on node gpu-a-07 exited on signal 11 "
        "(Segmentation fault).\n"
    )
    assert _verdict(text) == ("user_code", "job", "gpu-a-07")


def test_prterun_wrapped_signal_line_names_the_node() -> None:
    # help-prun.txt wraps the same message: "... on node %s exited on\nsignal %d (%s)."
    text = _PROMPT + (
        "prterun noticed that process rank 5 with PID 4242 on node gpu-a-07 exited on\n"
        "signal 9 (Killed).\n"
    )
    assert _verdict(text) == ("oom_host", "unknown", "gpu-a-07")


def test_lost_orte_or_prte_daemon_names_the_remote_daemons_node() -> None:
    # [node-died]: "%s has lost communication with a remote daemon.\n\n  HNP daemon   : %s on
    # node %s\n  Remote daemon: %s on node %s"
    for who in ("ORTE", "PRTE"):
        text = _PROMPT + (
            f"{who} has lost communication with a remote daemon.\n\n"
            "  HNP daemon   : [[4242,0],0] on node login-01\n"
            "  Remote daemon: [[4242,0],3] on node gpu-a-07\n\n"
            "This is usually due to either a failure of the TCP network\n"
            "connection to the node, or possibly an internal failure of\n"
            "the daemon itself.\n"
        )
        assert _verdict(text) == ("interconnect", "unknown", "gpu-a-07"), who


def test_a_daemon_that_failed_before_reporting_names_no_node() -> None:
    # [failed-daemon] names no node
    text = _PROMPT + (
        "An ORTE daemon has unexpectedly failed after launch and before\n"
        "communicating back to mpirun.\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", None)


def test_a_rank_that_called_abort_names_its_node() -> None:
    # [proc-ordered-abort]: "%s has exited due to process rank %lu with PID %lu on\nnode %s
    # calling "abort"." (PRRTE: "... on node %s calling\n"abort"")
    text = _PROMPT + (
        "mpirun has exited due to process rank 5 with PID 4242 on\n"
        'node gpu-a-07 calling "abort". This may have caused other processes\n'
        "in the application to be terminated by signals sent by mpirun\n"
    )
    assert _verdict(text) == ("user_code", "job", "gpu-a-07")


def test_hydra_termination_block_names_the_node_it_ran_at() -> None:
    text = (
        "[mpiexec@login-01] Sending Ctrl-C to processes as requested\n"
        "===================================================================================\n"
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   RANK 5 PID 4242 RUNNING AT gpu-a-07\n"
        "=   KILLED BY SIGNAL: 9 (Killed)\n"
        "===================================================================================\n"
    )
    assert _verdict(text) == ("oom_host", "unknown", "gpu-a-07")


def test_elastic_root_cause_names_its_host_over_the_timeouts_of_other_hosts() -> None:
    # torch/distributed/elastic/multiprocessing/errors: the Root Cause table's "host :" and
    # "rank :" fields; "[rankN]:" in front of a line labels a rank, not a host
    text = (
        "gpu-a-01: [rank0]:[E1102 04:10:01.118 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=811, OpType=ALLREDUCE, "
        "Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2026-11-02_04:09:40\n"
        "  host      : gpu-a-04\n"
        "  rank      : 12 (local_rank: 4)\n"
        "  exitcode  : -7 (pid: 8812)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 7 (SIGBUS) received by PID 8812\n"
        "============================================================\n"
    )
    assert _verdict(text)[2] == "gpu-a-04"


def test_a_rank_label_alone_names_no_host() -> None:
    text = (
        "[rank3]:[E1102 04:10:01.118 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=811, OpType=ALLREDUCE) ran for 600001 "
        "milliseconds before timing out.\n"
    )
    assert _verdict(text) == ("nccl_timeout_unknown", "unknown", None)


def test_open_mpi_peer_hung_up_names_the_peer_host_not_the_local_host() -> None:
    # help-mpi-btl-tcp.txt [peer hung up]: "the root cause of this problem is the failure of
    # the peer"; "  Local host: %s\n  Local PID:  %d\n  Peer host:  %s"
    text = (
        "[gpu-a-01][[4242,1],3][btl_tcp_frag.c:241:mca_btl_tcp_frag_recv] "
        "mca_btl_tcp_frag_recv: readv failed: Connection timed out (110)\n"
        "An MPI communication peer process has unexpectedly disconnected.  This\n"
        "usually indicates a failure in the peer process (e.g., a crash or\n"
        "otherwise exiting without calling MPI_FINALIZE first).\n\n"
        "  Local host: gpu-a-01\n"
        "  Local PID:  4242\n"
        "  Peer host:  gpu-a-07\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "gpu-a-07")


def test_open_mpi_readv_failures_name_no_node_not_even_the_printers() -> None:
    # btl_tcp_frag.c BTL_ERROR: "[%s]%s[%s:%d:%s] " (the printer's own nodename) then
    # "mca_btl_tcp_frag_recv: readv failed: %s (%d)"
    text = "".join(
        f"[{h}][[4242,1],{r}][btl_tcp_frag.c:241:mca_btl_tcp_frag_recv] "
        "mca_btl_tcp_frag_recv: readv failed: Connection timed out (110)\n"
        for r, h in ((3, "gpu-a-01"), (9, "gpu-a-02"))
    )
    assert _verdict(text) == ("interconnect", "unknown", None)


def test_open_mpi_client_connect_fail_names_the_address_it_could_not_reach() -> None:
    # [client connect fail]: "  Local host: %s\n  PID:        %d\n  Message:    %s\n  Error: ..."
    text = (
        "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This\n"
        "should not happen.\n\n"
        "  Local host: gpu-a-01\n"
        "  PID:        4242\n"
        "  Message:    connect() to 10.4.0.17:1024 failed\n"
        "  Error:      Connection refused (111)\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "10.4.0.17")


def test_hydra_connect_failure_names_the_host_it_dialled_not_the_local_one() -> None:
    # HYD_sock_connect: 'unable to connect from "%s" to "%s" (%s)' (gethostname(), the target)
    text = (
        "[mpiexec@login-01] HYD_sock_connect (lib/utils/sock.c:241): unable to connect from "
        '"login-01" to "gpu-a-07" (Connection refused)\n'
        "[mpiexec@login-01] main (mpiexec/mpiexec.c:360): error waiting for event\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", "gpu-a-07")


# pdsh relays each remote line as "%S: %s" (chaos/pdsh src/pdsh/dsh.c): a Python exception's
# line is read without the prefix too, since the exception rule reads a line from its start
_RELAYED = (
    "{h}: Traceback (most recent call last):\n"
    '{h}:   File "train.py", line 10, in <module>\n'
    "{h}:     main()\n"
    "{h}: ValueError: bad shape (3, 4)\n"
)


def test_a_traceback_relayed_by_pdsh_is_the_relaying_hosts_exception() -> None:
    text = _RELAYED.format(h="gpu-a-07") + "pdsh@login-01: gpu-a-07: ssh exited with exit code 1\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", "gpu-a-07")
    assert got.evidence[0] == "gpu-a-07: ValueError: bad shape (3, 4)"  # quoted as delivered


def test_a_relayed_traceback_outranks_another_hosts_ssh_exit() -> None:
    # the exception is what ended the job on gpu-a-07; gpu-a-09 was stopped with it
    text = (
        _RELAYED.format(h="gpu-a-07")
        + "pdsh@login-01: gpu-a-07: ssh exited with exit code 1\n"
        + "pdsh@login-01: gpu-a-09: ssh exited with exit code 143\n"
    )
    assert _verdict(text) == ("user_code", "job", "gpu-a-07")
