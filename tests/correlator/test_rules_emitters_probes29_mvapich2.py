"""Probe set twenty-nine (MVAPICH2): mpirun_rsh, mpispawn and the ranks, by the host they name.

Read from kumattau/mvapich2 @7b3539c49333 (a mirror of the MVAPICH2 release sources):
- src/mpid/ch3/channels/common/include/debug_utils.h: PRINT_ERROR's prefix "[%s][%s] " (the
  process's output prefix, then the function); the prefixes are "%s:mpispawn_%i"
  (src/pm/mpirun/mpispawn.c, gethostname()), "%s:mpi_rank_%i" (src/mpid/ch3/src/mpid_init.c)
  and "%s:mpirun_rsh" (src/pm/mpirun/mpirun_rsh.c, the launching host);
- src/pm/mpirun/mpispawn.c child_handler: "MPI process (rank: %d, pid: %d)" then "%s exited
  with status %d" or "%s terminated with signal %d -> abort job";
- src/pm/mpirun/wfe_mpirun.c: mpirun_rsh's "mpispawn_%d from node %s aborted: %s (%d)", the
  strings of src/pm/mpirun/mpispawn_error_codes.h;
- src/mpid/ch3/channels/common/src/util/error_handling.c: "Caught error: %s (signal %d)";
- src/mpid/ch3/channels/mrail/src/gen2/ibv_channel_manager.c handle_cqe: an error completion
  "Msg from %d: wc.status=%d (%s), ..." naming the peer RANK, then "[] Got completion with
  error %d, vendor code=0x%x, dest rank=%d".
A rank's own crash is the job's and names the host it ran on; the launching host and a rank
that only saw its peer's completions fail are never named. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

MV2 = "kumattau/mvapich2 {}@7b3539c493"
SPAWN = MV2.format("src/pm/mpirun/mpispawn.c")
WFE = MV2.format("src/pm/mpirun/wfe_mpirun.c")
ERRH = MV2.format("src/mpid/ch3/channels/common/src/util/error_handling.c")
CQE = MV2.format("src/mpid/ch3/channels/mrail/src/gen2/ibv_channel_manager.c")
JOB = ("user_code", "job")
SIGKILL = ("oom_host", "unknown")
_SPAWN = "[{host}:mpispawn_{i}][child_handler] "
_RSH = "[{launch}:mpirun_rsh][process_mpispawn_connection] "
_IDS = {"i": (1, 0, 15), "r": (3, 0, 127), "p": (4411, 902211)}
_LAUNCH = {"launch": ("login01", "head-node-2", "gpu-a-01")}

FORMATS = (
    Fmt(
        "spawn-child-crash-signal",
        SPAWN,
        "MPI process (rank: {r}, pid: {p}) terminated with signal {sig} -> abort job\n",
        {**_IDS, "host": HOSTS, "sig": (11, 6, 8)},
        JOB,
        culprit="host",
        prefixes=(_SPAWN,),
    ),
    Fmt(
        "spawn-child-sigkill",
        SPAWN,
        "MPI process (rank: {r}, pid: {p}) terminated with signal 9 -> abort job\n",
        {**_IDS, "host": HOSTS},
        SIGKILL,
        culprit="host",
        prefixes=(_SPAWN,),
    ),
    Fmt(
        "spawn-child-exit",
        SPAWN,
        "MPI process (rank: {r}, pid: {p}) exited with status {c}\n",
        {**_IDS, "host": HOSTS, "c": (1, 2, 252)},
        JOB,
        culprit="host",
        prefixes=(_SPAWN,),
    ),
    Fmt(
        "rank-error-sighandler",
        ERRH,
        "Caught error: {what} (signal {sig})\n",
        {
            **_IDS,
            "host": HOSTS,
            "what": ("Segmentation fault",),
            "sig": (11,),
        },
        JOB,
        culprit="host",
        prefixes=("[{host}:mpi_rank_{r}][error_sighandler] ",),
    ),
    Fmt(
        "rsh-mpispawn-aborted",
        WFE,
        "mpispawn_{i} from node {host} aborted: {why}\n",
        {
            **_IDS,
            **_LAUNCH,
            "host": HOSTS,
            "why": (
                "MPI process error (1)",
                "Error while reading a PMI socket (4)",
                "An MPI process returned a non-zero exit code (2)",
                "Error while writing a PMI socket (5)",
            ),
        },
        JOB,
        culprit="host",
        prefixes=(_RSH,),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_an_mvapich2_rank_or_spawn_report_names_the_ranks_host(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


def _wc_error(host: str, rank: int, peer: int, status: str) -> str:
    """handle_cqe's lines for one error completion, as rank `rank` on `host` prints them."""
    pre = f"[{host}:mpi_rank_{rank}]"
    return (
        f"{pre}[handle_cqe] Send desc error in msg to {peer}, wc_opcode=0\n"
        f"{pre}[handle_cqe] Msg from {peer}: wc.status=12 ({status}), wc.wr_id=0x5d3f2c0, "
        "wc.opcode=0, vbuf->phead->type=24 = MPIDI_CH3_PKT_RNDV_R3_DATA\n"
        f"{pre}[handle_cqe] src/mpid/ch3/channels/mrail/src/gen2/ibv_channel_manager.c:497: [] "
        f"Got completion with error 12, vendor code=0x81, dest rank={peer}\n"
    )


@pytest.mark.parametrize("host", HOSTS[:4])
@pytest.mark.parametrize(
    "status", ["transport retry counter exceeded", "RNR retry counter exceeded"]
)
def test_a_rank_whose_peer_completions_failed_reads_as_the_fabric_and_is_not_named(
    host: str, status: str
) -> None:
    got = explain_text(_wc_error(host, 5, 3, status))
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", None), (
        CQE,
        got.explanation,
    )


def test_mpirun_rsh_names_the_aborted_node_never_the_launching_host() -> None:
    text = (
        "[login01:mpirun_rsh][process_mpispawn_connection] mpispawn_1 from node node0412 "
        "aborted: MPI process error (1)\n"
    )
    got = explain_text(text)
    assert got.node == "node0412", got.explanation


def test_the_crashed_ranks_host_is_named_with_the_launchers_report_beside_it() -> None:
    text = (
        "[node0412:mpi_rank_3][error_sighandler] Caught error: Segmentation fault (signal 11)\n"
        "[node0412:mpispawn_1][readline] Unexpected End-Of-File on file descriptor 6. MPI "
        "process died?\n"
        "[node0412:mpispawn_1][child_handler] MPI process (rank: 3, pid: 15024) terminated with "
        "signal 11 -> abort job\n"
        "[login01:mpirun_rsh][process_mpispawn_connection] mpispawn_1 from node node0412 "
        "aborted: MPI process error (1)\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", "node0412"), got.explanation


def test_the_cleanup_signal_abort_of_a_bystander_spawn_names_no_node() -> None:
    # code 7: that mpispawn was told to clean up after another node's abort
    text = (
        "[login01:mpirun_rsh][process_mpispawn_connection] mpispawn_2 from node gpu-b-03 "
        "aborted: MPISPAWN got cleanup signal (7)\n"
    )
    assert explain_text(text).node is None


# Where the peer rank ran, the text shows it: its own "[host:mpi_rank_N]" lines or its
# mpispawn's child_handler report for rank N
_PEER_CRASH = (
    "[node0412:mpi_rank_3][error_sighandler] Caught error: Segmentation fault (signal 11)\n",
    "[node0412:mpispawn_1][child_handler] MPI process (rank: 3, pid: 4411) terminated with "
    "signal 9 -> abort job\n",
)


@pytest.mark.parametrize("peer_line", _PEER_CRASH)
@pytest.mark.parametrize("victim_first", [True, False])
def test_the_peer_ranks_host_is_named_never_the_rank_that_saw_its_completions_fail(
    peer_line: str, victim_first: bool
) -> None:
    victim = _wc_error("gpu-a-07", 5, 3, "transport retry counter exceeded")
    got = explain_text(victim + peer_line if victim_first else peer_line + victim)
    assert got.node == "node0412", got.explanation


def test_a_peer_rank_whose_host_the_text_does_not_show_names_no_node() -> None:
    # rank 7 is shown on its host, rank 3 (the peer) nowhere
    text = (
        "[gpu-b-03:mpi_rank_7][error_sighandler] Caught error: Segmentation fault (signal 11)\n"
        + _wc_error("gpu-a-07", 5, 3, "transport retry counter exceeded")
    )
    assert explain_text(text).node is None


def test_a_rank_shown_on_two_hosts_names_neither() -> None:
    # two jobs' output in one text: rank 3 ran on both hosts, so which one is not known
    text = (
        "[node0412:mpi_rank_3][MPIDI_CH3_Abort] Fatal error in MPI_Init\n"
        "[gpu-b-03:mpi_rank_3][MPIDI_CH3_Abort] Fatal error in MPI_Init\n"
        + _wc_error("gpu-a-07", 5, 3, "transport retry counter exceeded")
    )
    assert explain_text(text).node is None
