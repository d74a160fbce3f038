"""Probe set seventeen (issue #11): texts whose culprit the corpus policy says NO host may be.

The healer drains the node explain names, so naming a host the text does not single out is the
worst culprit error. Each probe is built from an emitter's own format (cited beside it) in
several host conventions, and the policy line it follows is the corpus README's
(tests/fixtures/corpus/README.md): `node` is null "when several nodes show the same fault and
the text does not single one out", for masked names, `localhost` and placeholders; a socket
error names its remote peer, never the printer; timeouts alone name no culprit. The last group
is the structural question: a message that names its subject node, printed by a control-plane
host, names the subject, never the printing host.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

# open-gpu-kernel-modules (NVIDIA, 4c29105335610933e744f4ab2524ea63fc39edaf)
# src/nvidia/src/kernel/rmapi/nv_gpu_ops.c / nvRmXid's "NVRM: Xid (PCI:%04x:%02x:%02x): %d, %s"
# and kernel-open/nvidia/nv.c's "NVRM: GPU %04x:%02x:%02x.%x: GPU has fallen off the bus."
HW_LINES = {
    "xid79": "NVRM: Xid (PCI:0000:3b:00): 79, pid=12345, name=python, GPU has fallen off the bus.",
    "xid48": (
        "NVRM: Xid (PCI:0000:b7:00): 48, pid=2231, name=python3, An uncorrectable double bit "
        "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
    ),
    "xid94": (
        "NVRM: Xid (PCI:0000:18:00): 94, pid=3322, name=python, Contained: CE User Channel "
        "(0x9). RST: No, D-RST: No"
    ),
    "off_bus": "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
}
# torvalds/linux mm/oom_kill.c __oom_kill_process (v6.6): "Out of memory: Killed process %d
# (%s) total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB, UID:%u pgtables:%lukB
# oom_score_adj:%hd"
OOM_LINE = (
    "Out of memory: Killed process 48213 (python) total-vm:812345612kB, anon-rss:503316480kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:990000kB oom_score_adj:0"
)
TWO = ("gpu-07", "gpu-08")
THREE = ("node01", "node02", "dgx-h100-031")


def _syslog(hosts: tuple[str, ...], line: str, *, step_s: int) -> str:
    # RFC 3164 4.1.2 TIMESTAMP HOSTNAME TAG: what rsyslog and `journalctl` (short) print
    return "\n".join(
        f"Nov 22 12:00:{i * step_s:02d} {h} kernel: {line}" for i, h in enumerate(hosts)
    )


def _journal_iso(hosts: tuple[str, ...], line: str, *, step_s: int) -> str:
    # journalctl -o short-iso: "2024-03-20T20:31:29+0000 host kernel: ..."
    return "\n".join(
        f"2024-03-20T20:31:{i * step_s:02d}+0000 {h} kernel: {line}" for i, h in enumerate(hosts)
    )


def _pdsh_dmesg(hosts: tuple[str, ...], line: str, *, step_s: int) -> str:
    # pdsh's "%S: %s" (chaos/pdsh src/pdsh/dsh.c) over `dmesg -T` (util-linux record_ctime)
    return "\n".join(
        f"{h}: [Mon Nov  7 10:11:{i * step_s:02d} 2022] {line}" for i, h in enumerate(hosts)
    )


def _pdsh_bare(hosts: tuple[str, ...], line: str, *, step_s: int) -> str:
    del step_s  # pdsh over plain `dmesg | grep`: no clock at all
    return "\n".join(f"{h}: {line}" for h in hosts)


CONVENTIONS = {
    "syslog": _syslog,
    "journal_iso": _journal_iso,
    "pdsh_dmesg_T": _pdsh_dmesg,
    "pdsh_bare": _pdsh_bare,
}


@pytest.mark.parametrize("hosts", [TWO, THREE], ids=["two", "three"])
@pytest.mark.parametrize("step_s", [0, 1], ids=["same_second", "a_second_apart"])
@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
@pytest.mark.parametrize("fault", sorted(HW_LINES))
def test_one_hardware_fault_on_several_hosts_names_none(
    fault: str, convention: str, step_s: int, hosts: tuple[str, ...]
) -> None:
    # independent hardware faults are no cascade: an earlier clock does not make one host the
    # culprit of another host's GPU (reasoning.first_in_time reads cascades only)
    got = explain_text(CONVENTIONS[convention](hosts, HW_LINES[fault], step_s=step_s))
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.node


@pytest.mark.parametrize("fault", sorted(HW_LINES))
def test_one_hardware_fault_on_one_syslog_host_names_it(fault: str) -> None:
    # the control for the probe above: one host's own line names that host
    got = explain_text(_syslog(("gpu-07",), HW_LINES[fault], step_s=0))
    assert got.node == "gpu-07"


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_one_oom_kill_on_several_hosts_at_once_names_none(convention: str) -> None:
    got = explain_text(CONVENTIONS[convention](TWO, OOM_LINE, step_s=0))
    assert (got.category, got.node) == ("oom_host", None), got.node


# pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (v2.3) WorkNCCL's timeout
# message; Gloo's gloo/transport/tcp/unbound_buffer.cc "Timed out waiting %dms for recv
# operation to complete"; torch/distributed/elastic/multiprocessing/api.py "Sending process %s
# closing signal %s"; Slurm srun's "%s: task %s: Terminated" (src/srun/step_ctx / launch.c)
WATCHDOG = (
    "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds "
    "before timing out."
)
TIMEOUT_TEXTS = {
    "watchdog_pdsh_sigterm": "\n".join(
        [f"{h}: [2024-03-20 20:31:2{i},269] {WATCHDOG.format(r=i)}" for i, h in enumerate(TWO)]
        + [
            f"{h}: [2024-03-20 20:32:0{i},000] torch.distributed.elastic.multiprocessing.api: "
            "[WARNING] Sending process 1234 closing signal SIGTERM"
            for i, h in enumerate(TWO)
        ]
    ),
    "watchdog_srun_terminated": "\n".join(
        [f"{i}: {WATCHDOG.format(r=i)}" for i in range(2)]
        + [f"srun: error: {h}: task {i}: Terminated" for i, h in enumerate(TWO)]
    ),
    "gloo_recv_pdsh": "\n".join(
        f"{h}: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
        "Timed out waiting 1800000ms for recv operation to complete"
        for h in TWO
    ),
    "watchdog_sigterm_child_block": "\n".join(
        [f"{h}: [2024-03-20 20:31:2{i},269] {WATCHDOG.format(r=i)}" for i, h in enumerate(TWO)]
        + [
            f"gpu-08: {ln}"
            for ln in (
                "Root Cause (first observed failure):",
                "[0]:",
                "  time      : 2024-03-20_20:32:05",
                "  host      : gpu-08",
                "  rank      : 1 (local_rank: 0)",
                "  exitcode  : -15 (pid: 1234)",
                "  error_file: <N/A>",
                "  traceback : Signal 15 (SIGTERM) received by PID 1234",
            )
        ]
    ),
}


@pytest.mark.parametrize("key", sorted(TIMEOUT_TEXTS))
def test_timeouts_from_every_host_and_a_teardown_name_none(key: str) -> None:
    got = explain_text(TIMEOUT_TEXTS[key])
    assert got.node is None, got.node


# Masks and placeholders a reporter types where the host was, in the conventions that carry a
# host: syslog's HOSTNAME, NCCL's "host:pid:tid [dev]" prefix (src/debug.cc), torch elastic's
# failure block "host : ..." (errors/__init__.py _FAILURE_FORMAT_TEMPLATE)
MASKS = ("REDACTED", "host-redacted", "node-XX", "XX-gpu-01", "gpuXX", "nodeXXX", "your-host")


@pytest.mark.parametrize("mask", MASKS)
def test_a_masked_or_placeholder_host_names_none(mask: str) -> None:
    texts = (
        f"Nov 22 12:00:00 {mask} kernel: {HW_LINES['xid48']}",
        f"{mask}:1234:5678 [0] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'",
        f"[0]:\n  time      : 2024-03-20_20:32:05\n  host      : {mask}\n"
        "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 1234)\n",
    )
    for text in texts:
        got = explain_text(text)
        assert got.category is not None and got.node is None, (text, got.node)


@pytest.mark.parametrize("name", ["host1", "compute-node", "host-01.example.com", "gpu-a-07"])
def test_a_real_looking_name_is_a_name(name: str) -> None:
    # the policy's other side: a plain name, however generic, names its node (the corpus labels
    # a torch elastic "host : server" and an "host-01.example.com" so)
    got = explain_text(f"Nov 22 12:00:00 {name} kernel: {HW_LINES['xid48']}")
    assert got.node == name


# A login node's prompt running a launcher or a query over other nodes is not the node at fault
LOGIN_TEXTS = {
    "srun_ecc": "[alice@login01 ~]$ srun -N2 python train.py\n"
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "kubectl_oom": f"alice@login01:~$ kubectl logs trainer-0\n{OOM_LINE}",
    "pdsh_xid": f"[root@login01 ~]# pdsh -w gpu[01-04] 'dmesg | grep Xid'\n{HW_LINES['xid79']}",
    "srun_illegal": "login01% srun -N2 python train.py\n"
    "RuntimeError: CUDA error: an illegal memory access was encountered",
}


@pytest.mark.parametrize("key", sorted(LOGIN_TEXTS))
def test_a_login_prompt_that_runs_work_elsewhere_names_none(key: str) -> None:
    got = explain_text(LOGIN_TEXTS[key])
    assert got.category is not None and got.node is None, got.node


# Socket errors' peers: NCCL src/misc/socket.cc "socketStartConnect: Connect to %s failed : %s"
# (ncclSocketToString "addr<port>"), c10d's socket.cpp "The client socket has failed to connect
# to [%s]:%d (errno: %d - %s).", Gloo's pair.cc "Connection closed by peer [%s]:%d"
NO_PEER = (
    "127.0.0.1",
    "::1",
    "0.0.0.0",
    "localhost",
    "ip6-localhost",
    "x.x.x.x",
    "10.x.x.x",
    "MASTER_ADDR",
    "your.master.ip",
    "trainer.invalid",
)
SOCKET_FORMATS = (
    "gpu-07:1234:5678 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
    "{p}<29500> failed : Connection refused",
    "torch.distributed.DistNetworkError: The client socket has failed to connect to "
    "[{p}]:29500 (errno: 111 - Connection refused).",
    "RuntimeError: [/opt/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
    "[{p}]:29500",
)


@pytest.mark.parametrize("fmt", SOCKET_FORMATS, ids=["nccl", "c10d", "gloo"])
@pytest.mark.parametrize("peer", NO_PEER)
def test_a_loopback_masked_or_placeholder_peer_names_none(peer: str, fmt: str) -> None:
    got = explain_text(fmt.format(p=peer))
    assert (got.category, got.node) == ("interconnect", None), got.node


@pytest.mark.parametrize("fmt", SOCKET_FORMATS, ids=["nccl", "c10d", "gloo"])
def test_a_pods_service_dns_peer_is_named(fmt: str) -> None:
    # validation_3's reading: the peer may be a pod's DNS name (a headless Service's per-pod
    # record names that pod), which is a name, not a placeholder
    peer = "trainer-master-0.trainer.default.svc.cluster.local"
    assert explain_text(fmt.format(p=peer)).node == peer


def test_a_user_code_error_on_one_host_names_where_it_happened() -> None:
    # `node` is where the failure happened as the text names it, not blame: the training labels
    # set it on 38 of 116 user_code cases; the blame stays the job's
    text = "gpu-07:1234:5678 [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'"
    got = explain_text(text)
    assert (got.blame, got.node) == ("job", "gpu-07")


NODE_SETS = {
    "nodelist_range": "sched: Allocate JobId=12 NodeList=gpu[01-04] #CPUs=2\nslurmstepd: error: "
    "Detected 1 oom-kill event(s) in StepId=12.0. Some of your processes may have been killed "
    "by the cgroup out-of-memory handler.",
    "nodelist_comma": "NodeList=node1,node2\n"
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "srun_range": "srun: error: gpu[01-02]: tasks 0-1: Exited with exit code 1",
    "ctld_nodes_range": "Nov 22 12:00:00 slurm-ctl slurmctld[1234]: error: Nodes gpu-[07-08] "
    "not responding",
}


@pytest.mark.parametrize("key", sorted(NODE_SETS))
def test_a_node_set_names_none(key: str) -> None:
    got = explain_text(NODE_SETS[key])
    assert got.category is not None and got.node is None, got.node


# The structural question: the printing host (syslog/journal HOSTNAME of a control-plane,
# controller or head host) against the node the message is about. SchedMD/slurm
# 284c3b95f08a src/slurmctld/node_mgr.c "update_node: node %s reason set to: %s", "%s: Node %s
# unexpectedly rebooted boot_time=%u last response=%u", ping_nodes.c "Nodes %s not responding";
# job_mgr.c "requeue job %pJ due to failure of node %s", "Killing %pJ on failed node %s";
# kubernetes pkg/controller/util/node/controller_utils.go RecordNodeStatusChange "Node %s status
# is now: %s"; ray src/ray/gcs/gcs_server/gcs_node_manager.cc "The node with node id: %s and
# ip: %s has been marked dead because the detector has missed too many heartbeats from it."
SUBJECT_LINES = {
    "ctld_reason_set": "slurmctld[1234]: update_node: node gpu-07 reason set to: Kill task failed",
    "ctld_rebooted": "slurmctld[1234]: Node gpu-07 unexpectedly rebooted boot_time=1700000000 "
    "last response=1700000000",
    "ctld_not_responding": "slurmctld[1234]: error: Nodes gpu-07 not responding",
    "ctld_requeue": "slurmctld[1234]: requeue job JobId=1234 due to failure of node gpu-07",
    "ctld_killing": "slurmctld[1234]: Killing JobId=1234 on failed node gpu-07",
    "kcm_not_ready": "kube-controller-manager[1234]: Node gpu-07 status is now: NodeNotReady",
}


@pytest.mark.parametrize("key", sorted(SUBJECT_LINES))
def test_a_control_plane_line_names_its_subject_node_not_its_printer(key: str) -> None:
    got = explain_text(f"Nov 22 12:00:00 ctl-01 {SUBJECT_LINES[key]}")
    assert (got.blame, got.node) == ("node", "gpu-07"), got.node


def test_a_ray_head_marking_a_node_dead_names_that_node() -> None:
    text = (
        "Nov 22 12:00:00 ray-head gcs_server[1234]: [2024-03-20 20:32:05,123 W 1234 1234] "
        "gcs_node_manager.cc:123: The node with node id: abc123 and ip: 10.0.0.8 has been "
        "marked dead because the detector has missed too many heartbeats from it."
    )
    assert explain_text(text).node == "10.0.0.8"


# The same fault on two hosts in launchers' and managers' own host conventions (each cited in
# correlator/explain/hosts.py and hosts_subject.py): srun's "%s: task %s: Out Of Memory",
# slurmstepd's "slurmstepd-<node>: " argv0, slurmctld's node lines on the controller, the node
# lifecycle controller's events, torch elastic's failure block, Hydra's "RUNNING AT", PALS'
# "%s: rank %d died from signal %d", UCX's and Open MPI's signal handlers, Ray's raylet prefix
_STEPD_OOM = (
    "error: Detected 1 oom-kill event(s) in StepId=12.0. Some of your processes may have been "
    "killed by the cgroup out-of-memory handler."
)
_ELASTIC = (
    "[{i}]:\n  time      : 2024-03-20_20:32:05\n  host      : {h}\n"
    "  rank      : {i} (local_rank: 0)\n  exitcode  : -9 (pid: 123{i})\n"
    "  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 123{i}"
)
SEVERAL_HOSTS = {
    "srun_oom": f"slurmstepd: {_STEPD_OOM}\n"
    + "\n".join(f"srun: error: {h}: task {i}: Out Of Memory" for i, h in enumerate(TWO)),
    "stepd_argv0_oom": "\n".join(f"slurmstepd-{h}: {_STEPD_OOM}" for h in TWO),
    "ctld_reason_set": "\n".join(
        f"Nov 22 12:00:00 ctl slurmctld[1]: update_node: node {h} reason set to: Kill task failed"
        for h in TWO
    ),
    "kcm_not_ready": "\n".join(
        f"Nov 22 12:00:00 cp kube-controller-manager[1]: Node {h} status is now: NodeNotReady"
        for h in TWO
    ),
    "elastic_sigkill": "Root Cause (first observed failure):\n"
    + "\n".join(_ELASTIC.format(i=i, h=h) for i, h in enumerate(TWO)),
    "hydra_sigkill": "\n".join(
        f"=   RANK {i} PID 549{i} RUNNING AT {h}\n=   KILLED BY SIGNAL: 9 (Killed)"
        for i, h in enumerate(TWO)
    ),
    "pals_sigkill": "\n".join(f"{h}: rank {i} died from signal 9" for i, h in enumerate(TWO)),
    "ucx_segv": "\n".join(
        f"[{h}:3118{i}:0:3118{i}] Caught signal 11 (Segmentation fault: address not mapped to "
        "object at address (nil))"
        for i, h in enumerate(TWO)
    ),
    "ompi_segv": "\n".join(
        f"[{h}:1031{i}] *** Process received signal ***\n[{h}:1031{i}] Signal: Segmentation "
        "fault (11)"
        for i, h in enumerate(TWO)
    ),
    "ray_low_memory": "\n".join(
        f"(raylet, ip=10.0.0.{i}) Task was killed due to the node running low on memory."
        for i in (7, 8)
    ),
}


@pytest.mark.parametrize("key", sorted(SEVERAL_HOSTS))
def test_one_fault_on_two_hosts_in_launcher_and_manager_conventions_names_none(key: str) -> None:
    got = explain_text(SEVERAL_HOSTS[key])
    assert got.category is not None and got.node is None, got.node
