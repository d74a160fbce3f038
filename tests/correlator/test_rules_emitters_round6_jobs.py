"""Round six of the emitter families, scheduler half: Slurm's job reasons (slurm_protocol_defs.c)
and sacct's truncated states (print_fields.c) and exit codes, kubelet/controller events
(active_deadline.go, image_gc_manager.go, taint_eviction.go, device_taint_eviction.go,
lifecycle/predicate.go), c10d's TCPStore port in use, and the multi-host rule that a rank which
crashed beats the timeouts of the ranks that waited for it, and mlx5's link down beside them.

Each line is an emitter's format string (quoted in its family's `sources`) filled in with made-up
values, never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.explain.readers_sched import expand_state

# --- Slurm: job reasons (job_reason_string) and sacct's truncated states (print_fields.c) ---


@pytest.mark.parametrize(
    ("line", "category", "blame"),
    [
        ("JobState=FAILED Reason=NonZeroExitCode Dependency=(null)", "user_code", "job"),
        ("JobState=FAILED Reason=JobLaunchFailure Dependency=(null)", "node", "unknown"),
        ("JobState=FAILED Reason=SystemFailure Dependency=(null)", "node", "unknown"),
        ("JobState=NODE_FAIL Reason=NodeDown Dependency=(null)", "node", "node"),
        ("JobState=TIMEOUT Reason=TimeLimit Dependency=(null)", "scheduler", "job"),
        ("JobState=CANCELLED Reason=InactiveLimit Dependency=(null)", "scheduler", "job"),
    ],
)
def test_scontrols_failure_reasons(line: str, category: str, blame: str) -> None:
    got = explain_text(
        f"JobId=4242 JobName=train\n   UserId=alice(1000) GroupId=alice(1000)\n   {line}\n"
    )
    assert (got.category, got.blame) == (category, blame)


def test_a_pending_reason_is_nothing_to_explain() -> None:
    for reason in ("Resources", "Priority", "BeginTime", "QOSMaxGRESPerUser"):
        got = explain_text(
            f"JobId=4242 JobName=train\n   JobState=PENDING Reason={reason} Dependency=(null)\n"
        )
        assert got.category is None, reason


def test_sacct_truncated_states_expand_to_the_one_state_they_can_be() -> None:
    assert expand_state("OUT_OF_ME+") == "OUT_OF_MEMORY"
    assert expand_state("CANCELLED+") == "CANCELLED"
    assert expand_state("REQUEUE_F+") == "REQUEUE_FED"
    assert expand_state("RE+") == "RE+"  # several states begin so: left as printed
    assert expand_state("FAILED") == "FAILED"


def test_sacct_default_table_with_out_of_memory_cut_short() -> None:
    text = (
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n"
        "------------ ---------- ---------- ---------- ---------- ---------- -------- \n"
        "4242              train        gpu    physics         16 OUT_OF_ME+    0:125 \n"
        "4242.batch        batch               physics         16 OUT_OF_ME+    0:125 \n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("oom_host", "job")


# --- kubelet and controller events ---


@pytest.mark.parametrize(
    ("line", "category", "blame"),
    [
        (
            "  Warning  DeadlineExceeded  3m  kubelet  Pod was active on the node longer than the "
            "specified deadline",
            "scheduler",
            "job",
        ),
        (
            "  Warning  FreeDiskSpaceFailed  5m  kubelet  Failed to garbage collect required "
            "amount of images. Attempted to free 6238860902 bytes, but only found 0 bytes "
            "eligible to free.",
            "node",
            "node",
        ),
        (
            "  Warning  ImageGCFailed  5m  kubelet  failed to garbage collect required amount of "
            "images. Wanted to free 4520000000, but freed 0",
            "node",
            "node",
        ),
        (
            "  Normal  TaintManagerEviction  2m  taint-eviction-controller  Marking for deletion "
            "Pod ml/trainer-0",
            "node",
            "unknown",
        ),
        (
            "  Normal  DeviceTaintManagerEviction  2m  device-taint-eviction-controller  Marking "
            "for deletion Pod ml/trainer-0",
            "gpu_hardware",
            "unknown",
        ),
        (
            "  Warning  NodeAffinity  1m  kubelet  Predicate NodeAffinity failed",
            "scheduler",
            "infra",
        ),
    ],
)
def test_kubernetes_events_from_their_sources(line: str, category: str, blame: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame) == (category, blame)


def test_a_cancelled_taint_eviction_is_nothing_to_explain() -> None:
    got = explain_text(
        "  Normal  TaintManagerEviction  2m  taint-eviction-controller  Cancelling deletion of Pod "
        "ml/trainer-0\n"
    )
    assert got.category is None


# --- multi-host: the rank that crashed, not the ranks that timed out waiting for it ---

_WD = (
    "[rank{r}]:[E ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
    "for 600060 milliseconds before timing out."
)


def _child_failed(host: str, code: int, signal: str) -> str:
    # torch/distributed/elastic/multiprocessing/errors/__init__.py ChildFailedError.format_msg
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2026-01-01_00:00:00\n"
        f"  host      : {host}\n"
        "  rank      : 3 (local_rank: 3)\n"
        f"  exitcode  : {code} (pid: 1234)\n"
        "  error_file: <N/A>\n"
        f"  traceback : Signal {-code} ({signal}) received by PID 1234\n"
    )


def test_torchrun_root_cause_on_one_host_beats_the_other_hosts_timeouts() -> None:
    timeouts = f"gpu-02: {_WD.format(r=5)}\ngpu-04: {_WD.format(r=9)}\n"
    got = explain_text(timeouts + _child_failed("gpu-07", -11, "SIGSEGV"))
    assert (got.category, got.blame, got.node) == ("user_code", "job", "gpu-07")
    got = explain_text(timeouts + _child_failed("gpu-07", -9, "SIGKILL"))
    assert (got.category, got.blame, got.node) == ("oom_host", "unknown", "gpu-07")


def test_a_sigabrt_after_the_watchdog_is_the_timeouts_own_end() -> None:
    # ProcessGroupNCCL's watchdog ends a timed-out rank with std::abort(): the -6 is no new cause
    timeouts = f"gpu-02: {_WD.format(r=5)}\ngpu-04: {_WD.format(r=9)}\n"
    got = explain_text(timeouts + _child_failed("gpu-07", -6, "SIGABRT"))
    assert (got.category, got.blame) == ("nccl_timeout_unknown", "unknown")
    assert got.node != "gpu-02" and got.node != "gpu-04"


def test_a_crash_on_a_host_that_itself_timed_out_does_not_override_the_timeout() -> None:
    text = f"gpu-07: {_WD.format(r=3)}\ngpu-02: {_WD.format(r=5)}\n" + _child_failed(
        "gpu-07", -9, "SIGKILL"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("nccl_timeout_unknown", "unknown")


def test_deepspeeds_pdsh_return_code_names_its_host_over_the_waiting_hosts() -> None:
    text = (
        "gpu-03: [2026-01-01 00:00:00,000] [ERROR] [launch.py:325:sigkill_handler] "
        "['/usr/bin/python', '-u', 'train.py', '--local_rank=0'] exits with return code = -9\n"
        f"gpu-01: {_WD.format(r=0)}\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("oom_host", "unknown", "gpu-03")


# --- PyTorch c10d: the TCPStore server's port already in use (socket.cpp, libuv backend) ---


@pytest.mark.parametrize(
    "text",
    [
        "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - "
        "Address already in use).\n[W socket.cpp:464] [c10d] The server socket has failed to bind "
        "to 0.0.0.0:29500 (errno: 98 - Address already in use).\n[E socket.cpp:500] [c10d] The "
        "server socket has failed to listen on any local network address.\n",
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
        "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: "
        "address already in use\n",
    ],
)
def test_c10d_port_in_use_is_the_jobs_rendezvous_port(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == ("user_code", "job")


# --- Slurm: sacct's ExitCode <status>:<signal> beside FAILED, slurmstepd's STEPD TERMINATED ---


@pytest.mark.parametrize(
    ("exit_code", "category", "blame"),
    [
        ("0:9", "oom_host", "unknown"),  # killed by SIGKILL, nothing else shown
        ("137:0", "oom_host", "unknown"),  # the batch shell's 128 + 9
        ("0:11", "user_code", "job"),  # SIGSEGV
        ("1:0", "user_code", "job"),  # the script's own exit status
    ],
)
def test_sacct_failed_reads_its_exit_code_and_signal(
    exit_code: str, category: str, blame: str
) -> None:
    piped = f"JobID|JobName|State|ExitCode\n4242|train|FAILED|{exit_code}\n"
    table = (
        "JobID           JobName      State ExitCode \n"
        "------------ ---------- ---------- -------- \n"
        f"4242              train     FAILED {exit_code:>8} \n"
    )
    for text in (piped, table):
        got = explain_text(text)
        assert (got.category, got.blame) == (category, blame), text


def test_a_cancelled_job_stays_the_schedulers_whatever_its_signal() -> None:
    got = explain_text("JobID|JobName|State|ExitCode\n4242|train|CANCELLED by 1000|0:15\n")
    assert (got.category, got.blame) == ("scheduler", "job")


def test_stepd_terminated_banners_drain_the_node_they_name() -> None:
    for why in ("JOB NOT RUNNING", "JOB NOT ENDING WITH SIGNALS"):
        got = explain_text(
            f"slurmstepd: error: *** STEP 4242.0 STEPD TERMINATED ON node12 AT "
            f"2026-03-28T02:04:23 DUE TO {why} ***\n"
        )
        assert (got.category, got.blame, got.node) == ("node", "node", "node12"), why


# --- mlx5 (en_main.c mlx5e_update_carrier): a port's link down, at the host that logged it ---


def test_an_mlx5_link_down_is_the_fabric_at_the_logging_host_and_beats_the_timeouts() -> None:
    down = "Jan  1 00:00:00 gpu-04 kernel: [12345.678] mlx5_core 0000:41:00.0 ibp65s0: Link down\n"
    got = explain_text(down + f"gpu-02: {_WD.format(r=5)}\n")
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "gpu-04")
    up = explain_text("[12345.678] mlx5_core 0000:41:00.0 ibp65s0: Link up\n")
    assert up.category is None


def test_a_programs_cuda_error_outranks_a_link_flap_in_the_same_text() -> None:
    text = (
        "[12345.678] mlx5_core 0000:41:00.0 ibp65s0: Link down\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("user_code", "job")
