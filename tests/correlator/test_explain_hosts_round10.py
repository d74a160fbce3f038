"""Host-naming conventions of issue #11's round ten, pinned from the emitters' own formats.

Every log below is made up (hosts gpu-r10-NN, addresses in 10.10.0.0/16) but shaped by the
format its emitter prints, cited in correlator/explain/hosts.py and readers_sched.py beside the
pattern that reads it: kubectl's pod tables (printers.go) and the kubelet's eviction messages
(eviction/helpers.go), slurmctld (node_mgr.c, job_mgr.c, power_save.c), MPICH Hydra (dbg.c,
pmip_utils.c), Ray's raylet (node_manager.cc) and Horovod elastic (discovery.py, gloo_run.py).
The last group pins conventions that explain already read before this round.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text, readers_sched
from correlator.explain.hosts import host_in_line
from correlator.explain.readers_sched import context_hosts


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


_LOW_DISK = (
    "The node was low on resource: ephemeral-storage. Container app was using 2048Ki, "
    "which exceeds its request of 0."
)

# --- kubectl get pods tables -------------------------------------------------------------------

_WIDE_HEADER = (
    "NAMESPACE   NAME                  READY   STATUS      RESTARTS       AGE   IP           "
    "NODE          NOMINATED NODE   READINESS GATES"
)


def test_wide_pod_table_with_restarts_ago_reads_the_node_column_not_the_age() -> None:
    row = (
        "team-r10    trainer-5c8d-qwert    0/1     OOMKilled   4 (3m ago)     41m   10.10.3.4    "
        "gpu-r10-07    <none>           <none>"
    )
    assert _verdict(f"{_WIDE_HEADER}\n{row}\n") == ("oom_host", "job", "gpu-r10-07")


def test_wide_pod_table_row_without_restart_age_still_reads_the_node() -> None:
    row = (
        "team-r10    trainer-5c8d-qwert    0/1     OOMKilled   0              41m   10.10.3.4    "
        "gpu-r10-07    <none>           <none>"
    )
    assert context_hosts([_WIDE_HEADER, row]) == [None, "gpu-r10-07"]


def test_wide_pod_table_pasted_with_single_spaces_reads_the_node() -> None:
    header = "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"
    row = "trainer-5c8d-qwert 0/1 OOMKilled 2 41m 10.10.3.4 gpu-r10-07 <none> <none>"
    assert context_hosts([header, row]) == [None, "gpu-r10-07"]


def test_headerless_wide_pod_row_names_its_node() -> None:
    row = (
        "team-r10    trainer-5c8d-qwert    0/1     OOMKilled   4 (3m ago)   41m   10.10.3.4    "
        "gpu-r10-07    <none>           <none>"
    )
    assert readers_sched.pod_row_host(row) == "gpu-r10-07"
    assert _verdict(row + "\n") == ("oom_host", "job", "gpu-r10-07")


def test_headerless_evicted_row_with_the_kubelets_message_names_its_node() -> None:
    rows = (
        f"loader-7f9-abcde      team-r10      Evicted   gpu-r10-12   {_LOW_DISK}\n"
        "loader-7f9-fghij      team-r10      Evicted   gpu-r10-12   Pod The node had condition: "
        "[DiskPressure].\n"
    )
    assert _verdict(rows) == ("node", "node", "gpu-r10-12")


def test_evicted_table_with_its_header_names_the_node_column() -> None:
    text = (
        "NAME                NAMESPACE   STATUS    NODE         MESSAGE\n"
        f"loader-7f9-abcde    team-r10    Evicted   gpu-r10-12   {_LOW_DISK}\n"
    )
    assert _verdict(text) == ("node", "node", "gpu-r10-12")


@pytest.mark.parametrize(
    "row",
    [
        # no eviction message after the cell: nothing says the cell is a node
        "loader-7f9-abcde   team-r10   Evicted   gpu-r10-12   the disk filled up",
        # a wide row cut short (no NOMINATED NODE / READINESS GATES cells)
        "trainer-5c8d-qwert   0/1   OOMKilled   0   41m   10.10.3.4   gpu-r10-07",
        # a status in lower case is no kubectl STATUS value
        "trainer-5c8d-qwert   0/1   oomkilled   0   41m   10.10.3.4   gpu-r10-07   <none>   <none>",
    ],
)
def test_pod_rows_whose_shape_does_not_settle_the_node_name_none(row: str) -> None:
    assert readers_sched.pod_row_host(row) is None


# --- a pod "was evicted from <node>" (prose above the kubelet's message) -----------------------


def test_pod_evicted_from_a_node_in_prose_names_that_node() -> None:
    text = (
        "loader was evicted from gpu-r10-12 on 2031-02-03 at 04:05:06Z:\n\n"
        "reason=Evicted\nThe node was low on resource: ephemeral-storage.\nexitCode 137\n"
    )
    assert _verdict(text) == ("node", "node", "gpu-r10-12")


@pytest.mark.parametrize(
    "line",
    [
        "the entry was evicted from memory.",
        "the block was evicted from cache on the next write",
        "2 pods were evicted from the node on Monday",
    ],
)
def test_evicted_from_something_that_is_no_node_names_none(line: str) -> None:
    assert host_in_line(line) is None


# --- slurmctld lines about one node ------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "[2031-02-03T04:05:06.789] update_node: node gpu-r10-21 reason set to: Kill task failed",
        "[2031-02-03T04:05:06.789] update_node: node gpu-r10-21 state set to DRAINED",
        "[2031-02-03T04:05:06.789] drain_nodes: node gpu-r10-21 state set to DRAIN",
        "[2031-02-03T04:05:06.789] validate_node_specs: Node gpu-r10-21 unexpectedly rebooted "
        "boot_time=1917000000 last response=1917000100",
        "[2031-02-03T04:05:06.789] Node gpu-r10-21 rebooted, killing missing step 55.0",
        "[2031-02-03T04:05:06.789] Batch JobId=55 missing from batch node gpu-r10-21 (not found "
        "BatchStartTime after startup), Requeuing job",
        "[2031-02-03T04:05:06.789] node gpu-r10-21 not resumed by ResumeTimeout(600), setting "
        "DOWN and POWERED_DOWN",
    ],
)
def test_slurmctld_line_about_one_node_names_it(line: str) -> None:
    assert host_in_line(line) == "gpu-r10-21"


def test_kill_task_failed_drain_blames_the_node_slurmctld_names() -> None:
    text = (
        "[2031-02-03T04:05:06.789] update_node: node gpu-r10-21 reason set to: Kill task failed\n"
        "[2031-02-03T04:05:06.790] update_node: node gpu-r10-21 state set to DRAINED\n"
    )
    assert _verdict(text) == ("node", "node", "gpu-r10-21")


def test_unexpected_reboot_blames_the_node_slurmctld_names() -> None:
    line = (
        "[2031-02-03T04:05:06.789] validate_node_specs: Node gpu-r10-21 unexpectedly rebooted "
        "boot_time=1917000000 last response=1917000100\n"
    )
    assert _verdict(line) == ("node", "node", "gpu-r10-21")


def test_node_now_responding_is_a_recovery_and_names_no_host() -> None:
    assert host_in_line("[2031-02-03T04:05:06.789] Node gpu-r10-21 now responding") is None


# --- MPICH Hydra -------------------------------------------------------------------------------


def test_hydra_proxy_prefix_names_the_proxys_host() -> None:
    line = (
        "[proxy:0:1@gpu-r10-31] HYDU_create_process (lib/utils/launch.c:74): execvp error on "
        "file ./train (No such file or directory)"
    )
    assert host_in_line(line) == "gpu-r10-31"
    assert host_in_line(line.replace("proxy:0:1", "proxy:1")) == "gpu-r10-31"


def test_hydra_mpiexec_prefix_is_the_launchers_host_and_names_none() -> None:
    line = "[mpiexec@login-r10-02] control_cb (mpiexec/pmiserv_cb.c:208): assert (!closed) failed"
    assert host_in_line(line) is None


# --- Ray and Horovod ---------------------------------------------------------------------------


def test_ray_dead_worker_message_names_the_workers_node() -> None:
    text = (
        "ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this "
        "task. Check python-core-worker-*.log files for more information.\n"
        "A worker died or was killed while executing a task by an unexpected system error. To "
        "troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffff01 Worker "
        "ID: ab01 Node ID: 45eb Worker IP address: 10.10.8.7 Worker port: 10525 Worker PID: 9202 "
        "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
        "connection error code 2. End of file.\n"
    )
    assert _verdict(text)[2] == "10.10.8.7"


def test_horovod_elastic_first_failed_process_names_its_host() -> None:
    text = (
        "RuntimeError: Horovod detected that one or more processes exited with non-zero status, "
        "thus causing the job to be terminated. The first process to do so was:\n"
        "Process name: gpu-r10-44[3]\n"
        "Exit code: 137\n"
    )
    assert _verdict(text)[2] == "gpu-r10-44"


def test_horovod_blacklisted_host_is_named() -> None:
    assert host_in_line("INFO:root:blacklist failing host: gpu-r10-44") == "gpu-r10-44"


# --- conventions explain read before this round (kept) -----------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "[2031-02-03T04:05:06.789] Killing JobId=55 on failed node gpu-r10-50",
        "[2031-02-03T04:05:06.789] requeue job JobId=55 due to failure of node gpu-r10-50",
        "[2031-02-03T04:05:06.789] error: Nodes gpu-r10-50 not responding, setting DOWN",
        "srun: error: Node failure on gpu-r10-50",
        "srun: error: Task launch for StepId=55.0 failed on node gpu-r10-50: Communication "
        "connection failure",
        "The node with node id: 2b7c8f and address: gpu-r10-50 and node name: gpu-r10-50 has "
        "been marked dead because the detector has missed too many heartbeats from it.",
    ],
)
def test_node_failure_lines_already_read_name_the_failed_node(line: str) -> None:
    assert _verdict(line + "\n") == ("node", "node", "gpu-r10-50")


def test_printer_of_a_timeout_is_not_the_culprit_when_slurm_names_the_failed_node() -> None:
    text = (
        "gpu-r10-60:4242:4300 [0] NCCL INFO comm 0x55 rank 0 nranks 16 cudaDev 0 busId 1000\n"
        "[rank0]:[E1102 04:10:01.118000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=811, OpType=ALLREDUCE, NumelIn=1048576, "
        "NumelOut=1048576, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n"
        "[2031-02-03T04:05:06.789] Killing JobId=55 on failed node gpu-r10-61\n"
    )
    assert _verdict(text)[2] == "gpu-r10-61"


def test_sinfo_reasons_table_still_names_each_rows_node() -> None:
    lines = [
        "REASON               USER      TIMESTAMP           NODELIST",
        "Kill task failed     root      2031-02-03T04:05:06 gpu-r10-70",
    ]
    assert context_hosts(lines) == [None, "gpu-r10-70"]
