"""explain's last resort (the one host a text names, when the failure's own lines name none) never
names a host that the text shows only in good health (issue #11: a wrong node is worse than none).

A hostless failure (PyTorch's "CUDA error: uncorrectable ECC error encountered", NVRM's Xid 79
behind dmesg's clock; see test_explain_prompt_views.py) is pasted beside a view of one node, each
built as its tool prints it:
- `kubectl get nodes` / `kubectl get pods -o wide`: kubernetes/kubernetes
  pkg/printers/internalversion/printers.go (51652d1c232d) printNode (NAME STATUS ROLES AGE
  VERSION; STATUS "Ready", "NotReady", "Unknown", ",SchedulingDisabled" when cordoned) and
  printPod (NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES; STATUS the
  phase or a container's reason: "Completed", "Error", "OOMKilled", "CrashLoopBackOff", ...),
  the cells padded by the tabwriter (3 spaces at least);
- `sinfo -N`, `sinfo -N -l`, `sinfo -R`: SchedMD/slurm src/sinfo/opts.c (284c3b95f08a) default
  formats ("nodelist:0 ,nodes:.6 ,partition:.9 ,statecompact:6", the long one with
  "statelong:.11 ... ,reason:20", -R "reason:20 ,user:9 ,timestamp:19 ,nodelist:0"), states
  from src/common/slurm_protocol_defs.c node_state_string(_compact) lower-cased, REASON "none"
  when the node has none (src/sinfo/print.c _print_reason);
- `scontrol show node`: src/api/node_info.c slurm_sprint_node_table ("NodeName=%s ", "State=%s"
  node_state_string_complete, "Reason=%s [%s@%s]" only with a reason), also -o on one line;
- `nvidia-smi` relayed by pdsh ("host: " on each line, chaos/pdsh src/pdsh/dsh.c) or run at a
  shell prompt, showing nothing wrong.
A healthy node, pod or prompt leaves the node unnamed; the same view showing the node unhealthy
(NotReady, a failed pod, DOWN or DRAIN with a reason) still names it.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

H = "gpu-n07"
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
XID = (
    "[ 2345.678901] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
    "GPU has fallen off the bus."
)
FAILURES = {"ecc": ECC, "xid": XID}


def nodes(status: str) -> str:
    # printNode: NAME STATUS ROLES AGE VERSION
    return (
        "NAME      STATUS                     ROLES    AGE   VERSION\n"
        f"{H}   {status:<26} <none>   30d   v1.28.3\n"
    )


def pods(ready: str, status: str, restarts: str) -> str:
    # printPod, -o wide
    return (
        "NAME        READY   STATUS             RESTARTS   AGE   IP          NODE      "
        "NOMINATED NODE   READINESS GATES\n"
        f"trainer-0   {ready:<7} {status:<18} {restarts:<10} 12m   10.0.0.5    {H}   "
        "<none>           <none>\n"
    )


def pod_row(ready: str, status: str, restarts: str) -> str:
    # the same row pasted without its header
    return pods(ready, status, restarts).splitlines()[1] + "\n"


def sinfo_n(state: str) -> str:
    # "%N %.6D %.9P %6t"
    return f"NODELIST   NODES PARTITION STATE \n{H}        1      gpu* {state:<6}\n"


def sinfo_nl(state: str, reason: str) -> str:
    # "%N %.6D %.9P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20R" (AVAIL_FE the features)
    return (
        "NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE "
        "REASON              \n"
        f"{H}        1      gpu* {state:>11}   64   2:16:2 512000        0      1   (null) "
        f"{reason:<20}\n"
    )


def sinfo_r(reason: str, state: str) -> str:
    # sinfo -R -l: "reason:20 ,userlong:12 ,timestamp:19 ,statecompact:6 ,nodelist:0"
    return (
        "REASON               USER         TIMESTAMP           STATE  NODELIST\n"
        f"{reason:<20} root(0)      2024-06-01T10:00:00 {state:<6} {H}\n"
    )


def scontrol(state: str, reason: str = "") -> str:
    # slurm_sprint_node_table, one "   " indented line per group of fields
    out = (
        f"NodeName={H} Arch=x86_64 CoresPerSocket=16\n"
        "   CPUAlloc=0 CPUEfctv=64 CPUTot=64 CPULoad=0.02\n"
        "   AvailableFeatures=(null)\n"
        "   Gres=gpu:h100:8\n"
        f"   NodeAddr={H} NodeHostName={H} Version=23.11.4\n"
        "   RealMemory=512000 AllocMem=0 FreeMem=498000 Sockets=2 Boards=1\n"
        f"   State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
        "   Partitions=gpu\n"
        "   BootTime=2024-06-01T08:00:00 SlurmdStartTime=2024-06-01T08:01:00\n"
    )
    return out + (f"   Reason={reason} [root@2024-06-01T10:00:00]\n" if reason else "")


def scontrol_one_line(state: str, reason: str = "") -> str:
    # scontrol -o show node: the same fields on one line
    return " ".join(scontrol(state, reason).split()) + "\n"


SMI = (
    "Mon Jun  3 10:00:00 2024\n"
    "+---------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |\n"
    "|-----------------------------------------+----------------------+----------------------+\n"
    "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
    "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |\n"
    "|=========================================+======================+======================|\n"
    "|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |                    0 |\n"
    "| N/A   31C    P0              70W / 700W |      4MiB / 81559MiB |      0%      Default |\n"
    "+-----------------------------------------+----------------------+----------------------+\n"
)
PDSH_SMI = "".join(f"{H}: {line}\n" for line in SMI.splitlines())


HEALTHY = {
    "kubectl_nodes_ready": nodes("Ready"),
    "kubectl_pods_running": pods("1/1", "Running", "0"),
    "kubectl_pods_completed": pods("0/1", "Completed", "0"),
    "kubectl_pod_row_running": pod_row("2/2", "Running", "0"),
    "sinfo_n_idle": sinfo_n("idle"),
    "sinfo_n_alloc": sinfo_n("alloc"),
    "sinfo_n_mix": sinfo_n("mix"),
    "sinfo_nl_idle_no_reason": sinfo_nl("idle", "none"),
    "sinfo_nl_allocated_no_reason": sinfo_nl("allocated", "none"),
    "scontrol_idle": scontrol("IDLE"),
    "scontrol_mixed": scontrol("MIXED"),
    "scontrol_allocated_one_line": scontrol_one_line("ALLOCATED"),
    "pdsh_nvidia_smi": PDSH_SMI,
}

UNHEALTHY = {
    "kubectl_nodes_not_ready": nodes("NotReady"),
    "kubectl_nodes_unknown": nodes("Unknown"),
    "kubectl_nodes_cordoned": nodes("Ready,SchedulingDisabled"),
    "kubectl_pods_error": pods("0/1", "Error", "0"),
    "kubectl_pods_oomkilled": pods("0/1", "OOMKilled", "0"),
    "kubectl_pods_crashloop": pods("0/1", "CrashLoopBackOff", "4"),
    "kubectl_pods_pending": pods("0/1", "Pending", "0"),
    "kubectl_pods_running_restarted": pods("1/1", "Running", "3"),
    "kubectl_pods_running_unready": pods("0/1", "Running", "0"),
    "sinfo_n_drain": sinfo_n("drain"),
    "sinfo_n_down_not_responding": sinfo_n("down*"),
    "sinfo_n_idle_not_responding": sinfo_n("idle*"),
    "sinfo_nl_mixed_with_reason": sinfo_nl("mixed", "Xid 79"),
    "sinfo_nl_drained": sinfo_nl("drained", "gpu fell off bus"),
    "sinfo_r": sinfo_r("Not responding", "down*"),
    "scontrol_down_not_responding": scontrol("DOWN+NOT_RESPONDING", "Not responding"),
    "scontrol_idle_drain": scontrol("IDLE+DRAIN", "Xid 79 on GPU 3"),
    "scontrol_mixed_reason": scontrol("MIXED", "ECC errors"),
    "scontrol_drain_one_line": scontrol_one_line("IDLE+DRAIN", "gpu_xid"),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("view", sorted(HEALTHY))
@pytest.mark.parametrize("view_first", [True, False])
def test_a_host_shown_only_healthy_is_not_the_last_resort_culprit(
    failure: str, view: str, view_first: bool
) -> None:
    parts = [HEALTHY[view], FAILURES[failure] + "\n"]
    got = explain_text("\n".join(parts if view_first else parts[::-1]))
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None)


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("view", sorted(UNHEALTHY))
def test_a_host_shown_unhealthy_can_still_be_the_last_resort_culprit(
    failure: str, view: str
) -> None:
    got = explain_text(FAILURES[failure] + "\n" + UNHEALTHY[view])
    assert (got.blame, got.node) == ("node", H)


PROMPT = "[alice@{h} ~]$ "


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_prompt_with_nothing_typed_after_a_viewed_file_names_no_host(failure: str) -> None:
    # `tail` of a job's file on a login node, then the prompt back with nothing typed
    text = (
        PROMPT.format(h="login01")
        + "tail -n 20 slurm-1234.out\n"
        + FAILURES[failure]
        + "\n"
        + PROMPT.format(h="login01")
        + "\n"
    )
    assert explain_text(text).node is None


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_healthy_nvidia_smi_at_a_prompt_does_not_own_a_failure_pasted_after_the_next_prompt(
    failure: str,
) -> None:
    text = PROMPT.format(h=H) + "nvidia-smi\n" + SMI + PROMPT.format(h=H) + "\n" + FAILURES[failure]
    assert explain_text(text).node is None


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_output_in_front_of_its_shells_prompt_still_names_the_prompt_host(failure: str) -> None:
    # the corpus policy: a job's output, then its shell's prompt back, name that shell's host
    got = explain_text(FAILURES[failure] + "\n" + PROMPT.format(h="c002") + "\n")
    assert (got.blame, got.node) == ("node", "c002")


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failure_in_a_commands_output_at_a_prompt_still_names_the_prompt_host(
    failure: str,
) -> None:
    command = "python train.py" if failure == "ecc" else "dmesg -T | tail"
    text = PROMPT.format(h=H) + command + "\n" + FAILURES[failure] + "\n" + PROMPT.format(h=H)
    assert (explain_text(text).blame, explain_text(text).node) == ("node", H)


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_healthy_row_does_not_hide_the_same_host_shown_elsewhere(failure: str) -> None:
    # the host is named by its own syslog line too: the healthy row takes nothing away
    text = (
        nodes("Ready")
        + "\n"
        + f"Jun  3 10:00:01 {H} kubelet[812]: I0603 10:00:01 started\n"
        + FAILURES[failure]
        + "\n"
    )
    assert explain_text(text).node == H


# A healthy run's progress lines (correlator/explain/hosts_health.py progress_lines): NCCL's
# "%s:%d:%d [%d] NCCL INFO " prefix (NVIDIA/nccl src/debug.cc) before src/init.cc's "comm %p
# rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE", Open MPI's --report-bindings "MCW
# rank %d bound to %s: %s" (orte/mca/ess/base/ess_base_fns.c) behind "[host:pid] ", srun -v's
# "launching %ps on host %s, %u tasks: %s" (SchedMD/slurm src/api/step_launch.c); and an error
# path's INFO line "%s:%d -> %d" (NVIDIA/nccl src/include/checks.h), which is none of them.
def nccl_init(host: str, rank: int) -> str:
    return (
        f"{host}:{1234 + rank}:{1250 + rank} [{rank}] NCCL INFO comm 0x55d1c8a0{rank}f00 rank "
        f"{rank} nranks 2 cudaDev {rank} busId 1b000 - Init COMPLETE"
    )


NEIGHBOUR_PROGRESS = {
    "nccl_init": nccl_init("gpu-n08", 1),
    "mpi_bindings": "[gpu-n08:02234] MCW rank 1 bound to socket 0[core 1[hwt 0]]: "
    "[./B/./.][./././.]",
    "srun_launch": "srun: launching StepId=4411.0 on host gpu-n08, 4 tasks: [4-7]",
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("progress", sorted(NEIGHBOUR_PROGRESS))
def test_a_host_seen_only_in_progress_lines_is_no_suspect_beside_one_that_failed(
    failure: str, progress: str
) -> None:
    # the failing rank's NCCL error path names its host; the neighbour only started healthily
    text = "\n".join(
        [
            NEIGHBOUR_PROGRESS[progress],
            nccl_init(H, 0),
            f"{H}:1234:1234 [0] NCCL INFO enqueue.cc:2299 -> 1",
            FAILURES[failure],
        ]
    )
    assert explain_text(text).node == H


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_the_one_host_of_a_job_log_is_named_though_it_printed_only_progress(failure: str) -> None:
    assert explain_text(nccl_init(H, 0) + "\n" + FAILURES[failure]).node == H


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_two_hosts_seen_only_in_progress_lines_settle_no_culprit(failure: str) -> None:
    text = "\n".join([nccl_init(H, 0), nccl_init("gpu-n08", 1), FAILURES[failure]])
    assert explain_text(text).node is None
