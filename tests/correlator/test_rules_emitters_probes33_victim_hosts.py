"""Probe set thirty-three: the one host a text shows only printing losses is no culprit (issue #11).

explain's last resort names the one host a text shows when the fault's own lines name none. A
host whose every failure line reports only what it lost (a timeout, a watchdog, a remote
peer's error, a connection reset or closed by the peer, an IB retry exceeded) printed no fault
of its own: beside a hostless fault (PyTorch's "CUDA error: ..." with no prefix, NVRM's Xid 79
behind dmesg's clock) it is named by nobody's evidence, so no host is named. The same host's own
fault line still names it. Each loss line is its emitter's format with the printer's host where
the emitter (or its delivery) puts it:
- NCCL (NVIDIA/nccl @5067397c26, debug.cc's "%s:%d:%d [%d] NCCL WARN " prefix):
  src/misc/socket.cc "socketProgress: Connection closed by remote peer %s" and
  "socketProgressOpt: Call to recv from %s failed : %s"; src/transport/net_ib.cc "NET/IB : Got
  completion from peer %s with status=%d opcode=%d len=%d vendor err %d (%s)" and the older
  "with error %d, opcode %d, len %d, vendor err %d" (12: IBV_WC_RETRY_EXC_ERR);
- PyTorch's ProcessGroupNCCL watchdog "Watchdog caught collective operation timeout: ..."
  (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp) behind pdsh's "host: " (chaos/pdsh
  src/pdsh/dsh.c) and rsyslog's "Mon DD HH:MM:SS host prog[pid]: " head;
- Gloo (facebookincubator/gloo gloo/transport/tcp/pair.cc "Connection closed by peer [%s]:%d",
  "Read error [%s]: %s"; unbound_buffer.cc "Timed out waiting %dms for recv operation to
  complete") as torch raises them, behind pdsh;
- c10d's TCPStore (torch/csrc/distributed/c10d/socket.cpp "The client socket has failed to
  connect to [%s]:%d (errno: %d - %s).", "The client socket has timed out after %dms while trying
  to connect to (%s, %d)."), behind pdsh;
- torchrun's elastic agent (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py "The node
  '%s' has failed to send a keep-alive heartbeat to the rendezvous '%s' due to an error of type
  %s."; c10d_rendezvous_backend.py's RendezvousConnectionError "The connection to the C10d store
  has failed. See inner exception for details."), behind pdsh;
- UCX (openucx/ucx @9466d104a317, src/ucs/debug/log.c's "[%lu.%06lu] [%s:%-5d:%s] %17s:%-4u UCX
  ERROR " prefix): src/uct/ib/mlx5/ib_mlx5_log.c "Transport retry count exceeded on %s:%d/%s
  (synd 0x%x vend 0x%x hw_synd %d/%d)", rc_verbs_iface.c "send completion with error: %s [qpn
  0x%x wrid 0x%lx vendor_err 0x%x]", ucp_ep.c "ep %p: error '%s' on %s will not be handled since
  no error callback is installed", ud_ep.c "UD endpoint %p to %s:%d: unhandled timeout error";
- MPI: Open MPI btl_tcp_frag.c "[%s][%s][%s:%d:%s] mca_btl_tcp_frag_recv: readv failed: %s (%d)"
  and openib's handle_wc "from %s to: %s error polling %s with status %s status number %d ..."
  (open-mpi/ompi v4.x opal/mca/btl/); MVAPICH2 handle_cqe "[] Got completion with error %d,
  vendor code=0x%x, dest rank=%d" behind "[<host>:mpi_rank_<n>][handle_cqe] " (kumattau/mvapich2
  ibv_channel_manager.c); ORTE's "lost communication with a remote daemon" help text, whose
  "HNP daemon : %s on node %s" is the side that lost the other (orte/mca/errmgr/base/
  help-errmgr-base.txt).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

A, B = "gpu-a-01", "node0412"
PEER = "10.4.0.17"
_UCX_T = "[1717236031.123456]"
_WD = (
    "[rank3]:[E1102 04:10:01.118 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=811, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600001 milliseconds before timing out."
)


def _ucx(host: str, where: str, msg: str) -> str:
    return f"{_UCX_T} [{host}:12345:0] {where:>17}  UCX  ERROR {msg}\n"


def losses(h: str) -> dict[str, str]:
    """Each emitter's loss line as host `h` prints it."""
    nccl = f"{h}:4242:4250 [3] NCCL WARN "
    return {
        "nccl_closed": f"{nccl}socketProgress: Connection closed by remote peer {PEER}<45678>\n",
        "nccl_recv_reset": f"{nccl}socketProgressOpt: Call to recv from {PEER}<45678> failed : "
        "Connection reset by peer\n",
        "nccl_ib_retry": f"{nccl}NET/IB : Got completion from peer {PEER}<45678> with status=12 "
        "opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.4.0.11 remoteGid "
        f"::ffff:{PEER}\n",
        "nccl_ib_retry_old": f"{nccl}NET/IB : Got completion from peer {PEER}<45678> with error "
        "12, opcode 0, len 0, vendor err 129\n",
        "watchdog_pdsh": f"{h}: {_WD}\n",
        "watchdog_syslog": f"Mar  1 10:10:05 {h} python[4321]: {_WD}\n",
        "gloo_closed": f"{h}: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
        f"Connection closed by peer [{PEER}]:39141\n",
        "gloo_reset": f"{h}: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
        f"Read error [{PEER}]:38217: Connection reset by peer\n",
        "gloo_timeout": f"{h}: RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete\n",
        "store_refused": f"{h}: [W socket.cpp:663] [c10d] The client socket has failed to "
        f"connect to [{PEER}]:29500 (errno: 111 - Connection refused).\n",
        "store_timeout": f"{h}: [E301 10:00:05.123456789 socket.cpp:1011] [c10d] The client "
        f"socket has timed out after 900000ms while trying to connect to ({PEER}, 29500).\n",
        "torchrun_keepalive": f"{h}: W0301 10:10:05.123000 140 torch/distributed/elastic/"
        f"rendezvous/dynamic_rendezvous.py:1070] The node '{h}_4321_0' has failed to send a "
        "keep-alive heartbeat to the rendezvous 'job1' due to an error of type "
        "RendezvousConnectionError.\n",
        "torchrun_store_lost": f"{h}: torch.distributed.elastic.rendezvous.api."
        "RendezvousConnectionError: The connection to the C10d store has failed. See inner "
        "exception for details.\n",
        "ucx_mlx5_retry": _ucx(
            h,
            "ib_mlx5_log.c:177",
            "Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)",
        ),
        "ucx_rc_verbs": _ucx(
            h,
            "rc_verbs_iface.c:124",
            "send completion with error: transport retry counter exceeded [qpn 0x2f1 wrid 0x11 "
            "vendor_err 0x81]",
        ),
        "ucx_ep_timeout": _ucx(
            h,
            "ucp_ep.c:1661",
            "ep 0x7f0a1c0b1000: error 'Endpoint timeout' on rc_mlx5/mlx5_0:1 will not be "
            "handled since no error callback is installed",
        ),
        "ucx_ud": f"[{h}:12345:0:12346]       ud_ep.c:296  Fatal: UD endpoint 0x1b2c3d0 to "
        "<no debug data>: unhandled timeout error\n",
        "ompi_readv": f"[{h}][[4242,1],3][btl_tcp_frag.c:241:mca_btl_tcp_frag_recv] "
        "mca_btl_tcp_frag_recv: readv failed: Connection reset by peer (104)\n",
        "ompi_openib_retry": f"[{h}][[52183,1],0][btl_openib_component.c:3644:handle_wc] from "
        f"{h} to: {B} error polling LP CQ with status RETRY EXCEEDED ERROR status number 12 "
        "for wr_id 0x1b2e500 opcode 1  vendor error 129 qp_idx 0\n",
        "mvapich2_cqe": f"[{h}:mpi_rank_3][handle_cqe] src/mpid/ch3/channels/mrail/src/gen2/"
        "ibv_channel_manager.c:497: [] Got completion with error 12, vendor code=0x81, dest "
        "rank=5\n",
        "orte_lost_daemon": "ORTE has lost communication with a remote daemon.\n\n"
        f"  HNP daemon   : [[1234,0],0] on node {h}\n"
        "  Remote daemon: [[1234,0],3] on node 10.4.0.17\n",
    }


LOSSES = sorted(losses(A))
# hostless faults (no prefix, no host): PyTorch's CUDA errors, NVRM's Xid behind dmesg's clock
FAULTS = {
    "ecc": "RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
    "xid79": "[ 2345.678901] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has "
    "fallen off the bus.\n",
}
# the same faults as the host's own lines: pdsh's prefix, rsyslog's kernel head
OWN_FAULTS = {
    "ecc": "{h}: RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
    "xid79": "Mar  1 10:10:01 {h} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
    "GPU has fallen off the bus.\n",
}


@pytest.mark.parametrize("fault_first", [True, False])
@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("loss", LOSSES)
def test_a_host_that_only_printed_a_loss_is_not_the_culprit_of_a_hostless_fault(
    loss: str, fault: str, fault_first: bool
) -> None:
    parts = [losses(A)[loss], FAULTS[fault]]
    text = "".join(parts[::-1] if fault_first else parts)
    got = explain_text(text)
    # ORTE's report names the lost remote daemon's node: the peer, never the HNP's node
    peer = "10.4.0.17" if loss == "orte_lost_daemon" else None
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", peer), text


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("loss", ["watchdog_pdsh", "ucx_mlx5_retry", "gloo_closed"])
def test_two_hosts_that_only_printed_losses_name_none_either(loss: str, fault: str) -> None:
    text = losses(A)[loss] + losses(B)[loss] + FAULTS[fault]
    assert explain_text(text).node is None


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("loss", LOSSES)
def test_a_host_whose_own_line_shows_the_fault_is_still_named_beside_its_losses(
    loss: str, fault: str
) -> None:
    text = losses(A)[loss] + OWN_FAULTS[fault].format(h=A)
    assert explain_text(text).node == A, text


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_host_with_a_fault_line_of_its_own_stays_the_last_resort_beside_a_hostless_one(
    fault: str,
) -> None:
    # its own uncorrectable memory record is a fault of its own, no loss
    own = (
        f"Mar  1 10:10:00 {A} kernel: EDAC MC0: 1 UE memory read error on CPU_SrcID#0_Ha#0_"
        "Chan#0_DIMM#0 (channel:0 slot:0 page:0x1234 offset:0x0 grain:32 - OVERFLOW "
        "err_code:0101:0090)\n"
    )
    got = explain_text(losses(A)["watchdog_pdsh"] + own + FAULTS[fault])
    assert got.node == A


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_prompt_host_whose_command_printed_the_fault_is_still_named(fault: str) -> None:
    # the hostless fault is output of a command typed at that host's prompt: its own line
    text = f"[alice@{A} ~]$ python train.py\n" + f"{_WD}\n" + FAULTS[fault] + f"[alice@{A} ~]$ \n"
    assert explain_text(text).node == A


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_host_whose_line_only_a_catch_all_reads_is_still_a_suspect(fault: str) -> None:
    # NCCL's bare WARN (cut short here) says nothing of a loss: the line may be its own fault
    text = f"{A}:2841:2910 [3] enqueue.cc:1025 NCCL WARN Cuda failure\n" + FAULTS[fault]
    assert explain_text(text).node == A, text
