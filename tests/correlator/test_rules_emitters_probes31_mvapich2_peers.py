"""Probe set forty-three (MVAPICH2): a rank's IB errors beside its peer rank's own crash of any kind
(issue #11): the verdict is the peer's fault, and the peer rank's host the culprit.

Read from kumattau/mvapich2 (never a corpus case):
- src/mpid/ch3/channels/mrail/src/gen2/ibv_channel_manager.c handle_cqe (@7b3539c493): "Send
  desc error in msg to %d, wc_opcode=%d", "Msg from %d: wc.status=%d (%s), ..." and "[] Got
  completion with error %d, vendor code=0x%x, dest rank=%d" behind "[<host>:mpi_rank_<n>]
  [handle_cqe] " (debug_utils.h PRINT_ERROR, mpid_init.c's prefix);
- src/mpid/ch3/channels/common/src/util/error_handling.c (@0c0698879760): error_sighandler for
  SIGILL, SIGABRT, SIGFPE, SIGSEGV, SIGBUS: "Caught error: %s (signal %d)" of sys_siglist.
The peer's other ends as the other probe sets build them: the kernel's segfault and OOM-kill
lines, NVRM's Xid lines (NVIDIA's Xid catalog: 13 and 31 are RESTART_APP, the application's own
fault; 79 and 48 the GPU's), NCCL's "Cuda failure" (src/misc/cudawrap.cc) behind its prefix.
hosts_ranks.py places rank 3 on its host from the rank's own prefix.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

VICTIM, PEER = "gpu-a-07", "node0412"


def _wc_error(host: str, rank: int, peer: int) -> str:
    pre = f"[{host}:mpi_rank_{rank}][handle_cqe]"
    return (
        f"{pre} Send desc error in msg to {peer}, wc_opcode=0\n"
        f"{pre} Msg from {peer}: wc.status=12 (transport retry counter exceeded), "
        "wc.wr_id=0x5d3f2c0, wc.opcode=0, vbuf->phead->type=24 = MPIDI_CH3_PKT_RNDV_R3_DATA\n"
        f"{pre} src/mpid/ch3/channels/mrail/src/gen2/ibv_channel_manager.c:497: [] Got "
        f"completion with error 12, vendor code=0x81, dest rank={peer}\n"
    )


def _sighandler(what: str, sig: int) -> str:
    return f"[{PEER}:mpi_rank_3][error_sighandler] Caught error: {what} (signal {sig})\n"


def _kernel(msg: str) -> str:
    return f"Jun  1 10:00:02 {PEER} kernel: {msg}\n"


def _xid(code: int, text: str) -> str:
    return _kernel(f"NVRM: Xid (PCI:0000:18:00): {code}, pid=4411, {text}")


# where rank 3 ran, for the peer lines that do not show it themselves
_PLACED = f"[{PEER}:mpi_rank_3][MPIDI_CH3I_MRAILI_Cq_poll] polling\n"
JOB, GPU, OOM = ("user_code", "job"), ("gpu_hardware", "node"), ("oom_host", "job")
CRASHES = {
    "sighandler_segv": (_sighandler("Segmentation fault", 11), JOB),
    "sighandler_fpe": (_sighandler("Floating point exception", 8), JOB),
    "sighandler_ill": (_sighandler("Illegal instruction", 4), JOB),
    # SIGBUS alone reads as a too-small /dev/shm (signals.py): the peer's own reading is kept
    "sighandler_bus": (_sighandler("Bus error", 7), ("oom_host", "unknown")),
    "kernel_segfault": (
        _PLACED
        + _kernel(
            "python[4411]: segfault at 8 ip 00007f0000001234 sp 00007ffd00000000 error 4 in "
            "libfoo.so[7f0000000000+1000]"
        ),
        JOB,
    ),
    "xid13": (_PLACED + _xid(13, "Graphics Exception: ESR 0x504648=0x102000e"), JOB),
    "xid31": (
        _PLACED
        + _xid(
            31,
            "Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
            "0x7f_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
        ),
        JOB,
    ),
    "xid79": (_PLACED + _xid(79, "GPU has fallen off the bus."), GPU),
    "xid48": (
        _PLACED
        + _xid(
            48,
            "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer",
        ),
        GPU,
    ),
    "oom_kill": (
        _PLACED
        + _kernel(
            "Out of memory: Killed process 4411 (python) total-vm:812345612kB, "
            "anon-rss:503316480kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:990000kB "
            "oom_score_adj:0"
        ),
        OOM,
    ),
    "nccl_cuda": (
        _PLACED
        + f"{PEER}:4411:4411 [0] misc/cudawrap.cc:100 NCCL WARN Cuda failure 'an illegal memory "
        "access was encountered'\n",
        JOB,
    ),
}


@pytest.mark.parametrize("victim_first", [True, False])
@pytest.mark.parametrize("crash", sorted(CRASHES))
def test_the_peer_ranks_own_crash_decides_with_its_host_as_culprit(
    crash: str, victim_first: bool
) -> None:
    peer, (category, blame) = CRASHES[crash]
    victim = _wc_error(VICTIM, 5, 3)
    text = victim + peer if victim_first else peer + victim
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (category, blame, PEER), got.explanation


@pytest.mark.parametrize(
    "peer",
    [
        _sighandler("Aborted", 6),  # the abort a rank's teardown looks like too (signals.py)
        _PLACED + _xid(43, "Ch 00000010, engmask 00000101"),  # IGNORE: the reset after the fault
    ],
    ids=["sighandler_abrt", "xid43"],
)
def test_a_peer_line_that_is_no_crash_of_its_own_keeps_the_interconnect_verdict(
    peer: str,
) -> None:
    got = explain_text(_wc_error(VICTIM, 5, 3) + peer)
    assert got.category == "interconnect", got.explanation


@pytest.mark.parametrize(
    ("what", "sig", "want"),
    [
        ("Floating point exception", 8, JOB),
        ("Illegal instruction", 4, JOB),
        ("Aborted", 6, JOB),
        ("Bus error", 7, ("oom_host", "unknown")),
    ],
)
def test_mvapich2s_error_sighandler_names_the_ranks_host_and_the_signal(
    what: str, sig: int, want: tuple[str, str]
) -> None:
    got = explain_text(_sighandler(what, sig))
    assert (got.category, got.blame, got.node) == (*want, PEER), got.explanation


@pytest.mark.parametrize("code", [13, 31])
def test_an_nccl_loss_of_a_peer_whose_gpu_raised_an_application_xid_blames_the_peer(
    code: int,
) -> None:
    # NVIDIA/nccl net_ib "Got completion from peer %s with status=%d ...", the peer's address
    # owned by its own Bootstrap line (test_explain_culprit_peer_crash.py builds them so)
    text = (
        f"{VICTIM}:1234:1234 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>\n"
        f"{PEER}:4411:4411 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.2<0>\n"
        + _xid(code, "Graphics Exception: ESR 0x504648=0x102000e")
        + f"{VICTIM}:1234:1300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
        "from peer 10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129 (Send) hca "
        "mlx5_0\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", PEER), got.explanation
