"""Multi-host culprit reasoning (issue #11): a peer's own crash behind its peers' IB errors.

When one rank's process dies, the hosts still sending to it poll "transport retry counter
exceeded" completions for it (correlator/explain/reasoning_peers.py cites the sources): the
crash is the cause and its host the culprit, never a host that only printed the loss. Made-up
logs from the emitters' format strings:
- Open MPI openib (open-mpi/ompi opal/mca/btl/openib/btl_openib_component.c handle_wc with
  BTL_PEER_ERROR of opal/mca/btl/base/btl_base_error.h before v5): "[%s][%s:%d:%s] from %s to: %s
  error polling %s with status %s status number %d for wr_id %" PRIx64 " opcode %d  vendor
  error %d qp_idx %d"; orterun's "%s noticed that process rank %lu with PID %lu on node %s exited
  on signal %d (%s)." (orte/tools/orterun/help-orterun.txt).
- MVAPICH2 (kumattau/mvapich2 ibv_channel_manager.c handle_cqe): "Msg from %d: wc.status=%d
  (%s), ..." and "[] Got completion with error %d, vendor code=0x%x, dest rank=%d" behind
  "[<host>:mpi_rank_<n>][handle_cqe] "; error_sighandler's "Caught error: %s (signal %d)".
- NCCL (NVIDIA/nccl src/transport/net_ib.cc): "NET/IB : Got completion from peer %s with error
  %d, opcode %d, len %d, vendor err %d", later "with status=%d opcode=%d len=%d vendor err %d
  (%s)", then "with status=%s(%d) opcode=%s(%d) vendor_err=%u"; init "Bootstrap : Using
  %s:%s<0>"; misc/cudawrap "Cuda failure '%s'".
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


def _openib(frm: str, to: str, status: str = "RETRY EXCEEDED ERROR", number: int = 12) -> str:
    return (
        f"[{frm}][[52183,1],0][btl_openib_component.c:3644:handle_wc] from {frm} to: {to} error "
        f"polling LP CQ with status {status} status number {number} for wr_id 0x1b2e500 "
        "opcode 1  vendor error 129 qp_idx 0\n"
    )


def _orterun(host: str, signal: int, name: str) -> str:
    return (
        f"mpirun noticed that process rank 1 with PID 4321 on node {host} exited on signal "
        f"{signal} ({name}).\n"
    )


_RULE = "-" * 74 + "\n"
_SEGV = _orterun("hostB", 11, "Segmentation fault")

_NCCL_INIT = (
    "hostA:1234:1234 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>\n"
    "hostB:2345:2345 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.2<0>\n"
)
_NCCL_CUDA = (
    "hostB:2345:2345 [0] misc/cudawrap.cc:100 NCCL WARN Cuda failure 'an illegal memory access "
    "was encountered'\n"
)
_NCCL_LOSS = {
    "error": "with error 12, opcode 0, len 0, vendor err 129",
    "status": "with status=12 opcode=0 len=0 vendor err 129 (Send)",
    "status_str": "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129",
}


def _nccl_loss(form: str, peer: str = "10.0.0.2<45678>") -> str:
    return (
        "hostA:1234:1300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from "
        f"peer {peer} {_NCCL_LOSS[form]} hca mlx5_0\n"
    )


_MVAPICH2_LOSS = (
    "[hostA:mpi_rank_0][handle_cqe] Send desc error in msg to 1, wc_opcode=0\n"
    "[hostA:mpi_rank_0][handle_cqe] Msg from 1: wc.status=12 (transport retry counter "
    "exceeded), wc.wr_id=0x1f3e040, wc.opcode=0, vbuf->phead->type=0 = MPIDI_CH3_PKT_EAGER_SEND\n"
    "[hostA:mpi_rank_0][handle_cqe] src/mpid/ch3/channels/mrail/src/gen2/ibv_channel_manager.c"
    ":497: [] Got completion with error 12, vendor code=0x81, dest rank=1\n"
)


def test_openib_retry_exceeded_to_a_peer_that_segfaulted_blames_the_peer() -> None:
    text = _openib("hostA", "hostB") + _RULE + _SEGV + _RULE
    assert _verdict(text) == ("user_code", "job", "hostB")
    # the crash is told as the cause of the losses, not as a symptom with no cause shown
    assert "symptom" not in explain_text(text).explanation


def test_openib_rnr_retry_exceeded_to_a_peer_that_segfaulted_blames_the_peer() -> None:
    status = "RECEIVER NOT READY RETRY EXCEEDED ERROR"
    text = _openib("hostA", "hostB", status, 13) + _RULE + _SEGV
    assert _verdict(text) == ("user_code", "job", "hostB")


def test_openib_losses_from_two_hosts_to_one_crashed_peer_blame_the_peer() -> None:
    text = _openib("hostA", "hostB") + _openib("hostC", "hostB") + _SEGV
    assert _verdict(text) == ("user_code", "job", "hostB")


def test_openib_loss_with_no_fault_on_the_peer_stays_interconnect() -> None:
    # nothing on hostB: the line alone cannot tell a dead peer from the fabric (today's verdict)
    text = _openib("hostA", "hostB") + _RULE
    assert _verdict(text) == ("interconnect", "infra", "hostA")


def test_a_peer_killed_by_sigkill_is_the_teardown_not_the_cause() -> None:
    # a bare SIGKILL is what the launcher sends every rank once one aborts
    text = _openib("hostA", "hostB") + _RULE + _orterun("hostB", 9, "Killed")
    assert _verdict(text)[0] == "interconnect"


def test_a_flush_error_names_no_lost_peer() -> None:
    # IBV_WC_WR_FLUSH_ERR follows any error of the local QP: it points at no peer
    text = _openib("hostA", "hostB", "WORK REQUEST FLUSHED ERROR", 5) + _SEGV
    assert _verdict(text)[0] == "interconnect"


def test_two_lost_peers_that_both_crashed_name_no_single_culprit() -> None:
    text = (
        _openib("hostA", "hostB")
        + _openib("hostA", "hostC")
        + _SEGV
        + _orterun("hostC", 11, "Segmentation fault")
    )
    category, _, node = _verdict(text)
    assert (category, node) == ("interconnect", None)


def test_a_peer_that_lost_its_own_peers_is_no_linked_culprit() -> None:
    # hostA and hostB each lost the other: which one went first is not shown
    text = _openib("hostA", "hostB") + _openib("hostB", "hostA") + _SEGV
    assert _verdict(text)[0] == "interconnect"


def test_a_fault_of_the_printers_own_nic_keeps_the_interconnect_verdict() -> None:
    # torvalds/linux mlx5/core/health.c: "Driver is in error state. Unloading" on hostA itself
    text = (
        "Jun  1 10:00:30 hostA kernel: mlx5_core 0000:3b:00.0: Driver is in error state. "
        "Unloading\n" + _openib("hostA", "hostB") + _SEGV
    )
    assert _verdict(text)[0] == "interconnect"


def test_a_link_down_on_the_printer_keeps_the_interconnect_verdict() -> None:
    # mlx5/core/en_main.c mlx5e_update_carrier "Link down" on hostA: its own link explains the
    # losses as well as the peer's crash does, so nothing is linked
    text = (
        "Jun  1 10:00:00 hostA kernel: mlx5_core 0000:3b:00.0 ib0: Link down\n"
        + _openib("hostA", "hostB")
        + _SEGV
    )
    assert _verdict(text)[0] == "interconnect"


@pytest.mark.parametrize("form", sorted(_NCCL_LOSS))
def test_nccl_completion_from_a_peer_whose_cuda_failed_blames_the_peer(form: str) -> None:
    # the peer is named by address: hostB's own Bootstrap line owns 10.0.0.2
    text = _NCCL_INIT + _NCCL_CUDA + _nccl_loss(form)
    assert _verdict(text) == ("user_code", "job", "hostB")


def test_nccl_completion_from_a_peer_with_no_fault_stays_interconnect() -> None:
    assert _verdict(_NCCL_INIT + _nccl_loss("status")) == ("interconnect", "infra", "hostA")


def test_nccl_completion_from_a_peer_oom_killed_blames_the_peer() -> None:
    # torvalds/linux mm/oom_kill.c __oom_kill_process, on hostB's syslog
    oom = (
        "Jun  1 10:00:02 hostB kernel: Out of memory: Killed process 2345 (python) "
        "total-vm:812345612kB, anon-rss:503316480kB, file-rss:0kB, shmem-rss:0kB, UID:1000 "
        "pgtables:990000kB oom_score_adj:0\n"
    )
    assert _verdict(_NCCL_INIT + oom + _nccl_loss("status"))[::2] == ("oom_host", "hostB")


def _pdsh(host: str, clock: str, line: str) -> str:
    # pdsh's "%S: %s" (chaos/pdsh src/pdsh/dsh.c) in front of a logger's own clock
    return f"{host}: [2024-06-01 {clock},000] {line}"


def _timed(fault_clock: str) -> str:
    return (
        _pdsh("hostA", "10:00:00", _NCCL_INIT.splitlines(keepends=True)[0])
        + _pdsh("hostB", "10:00:00", _NCCL_INIT.splitlines(keepends=True)[1])
        + _pdsh("hostA", "10:00:31", _nccl_loss("status"))
        + _pdsh("hostB", fault_clock, _NCCL_CUDA)
    )


def test_a_peer_fault_shortly_before_the_loss_is_linked() -> None:
    assert _verdict(_timed("10:00:01")) == ("user_code", "job", "hostB")


def test_a_peer_fault_long_after_the_loss_is_not_linked() -> None:
    # the text's own clocks put the CUDA error 90 minutes after the loss: no cause of it
    assert _verdict(_timed("11:30:00")) == ("interconnect", "infra", "hostA")


def test_mvapich2_loss_of_a_rank_that_crashed_blames_its_host() -> None:
    text = _MVAPICH2_LOSS + (
        "[hostB:mpi_rank_1][error_sighandler] Caught error: Segmentation fault (signal 11)\n"
    )
    assert _verdict(text) == ("user_code", "job", "hostB")


def test_mvapich2_loss_of_a_rank_with_no_fault_keeps_todays_verdict() -> None:
    text = _MVAPICH2_LOSS + "[hostB:mpi_rank_1][MPIDI_CH3I_MRAILI_Cq_poll] polling\n"
    assert _verdict(text)[:2] == ("interconnect", "infra")
