"""Round six of the emitter families: the coverage audit of each family against its emitter's
full message list, and the multi-host rule that a rank which crashed beats the timeouts of the
ranks that waited for it.

Each line is an emitter's format string (quoted in its family's `sources`) filled in with made-up
values, never a corpus case: DCGM's field-violation messages (nvvs/src/DcgmRecorder.cpp with the
field tags of dcgm_fields.cpp), `nvidia-smi -q`'s SRAM threshold field, CUDA's cudaGetErrorString
strings as NCCL's CUDACHECK prints them, NCCL's init/bootstrap ncclInvalidArgument WARNs and IB
async events (src/init.cc, src/bootstrap.cc, src/transport/net_ib/common.cc), PyTorch's Gloo
connectFullMesh failure (ProcessGroupGloo.cpp), Slurm's job reasons (slurm_protocol_defs.c) and
sacct's truncated states (print_fields.c), and kubelet/controller events (active_deadline.go,
image_gc_manager.go, taint_eviction.go, device_taint_eviction.go, lifecycle/predicate.go).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.explain.readers_sched import expand_state

# --- DCGM: DCGM_FR_*_VIOLATION with the field tag nvvs prints ('Detected %ld %s for GPU %u') ---


@pytest.mark.parametrize(
    ("line", "category", "blame"),
    [
        ("Detected 2 ecc_dbe_volatile_total for GPU 3", "gpu_hardware", "node"),
        (
            "Detected 2 ecc_dbe_volatile_total for GPU 3 which is above the threshold 0",
            "gpu_hardware",
            "node",
        ),
        ("Detected 41 pcie_replay_counter for GPU 1", "gpu_hardware", "node"),
        ("Detected 7 ecc_sbe_volatile_total for GPU 0", "gpu_hardware", "unknown"),
        (
            "Detected 9 nvlink_crc_flit_error_count_total for GPU 2 which is above the threshold 4",
            "gpu_hardware",
            "unknown",
        ),
        (
            "Detected 3.25 power_usage for gpu:5 which is above the threshold 3.0",
            "gpu_hardware",
            "unknown",
        ),
        ("Cannot reliably read the power usage for GPU 4.", "gpu_hardware", "unknown"),
        ("Persistence mode for GPU 6 is disabled.", "node", "node"),
        ("Could not connect to the host engine: 'Host engine connection invalid'", "node", "node"),
    ],
)
def test_dcgm_diag_messages_from_dcgm_errors_h(line: str, category: str, blame: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame) == (category, blame)


def test_a_dcgm_xid_message_follows_the_xid_catalog() -> None:
    # DCGM_FR_XID_ERROR 'Detected XID %u for GPU %u': the catalog's bucket decides the blame
    for xid, category, blame in ((79, "gpu_hardware", "node"), (13, "user_code", "job")):
        got = explain_text(f"Detected XID {xid} for GPU 2\n")
        assert (got.category, got.blame) == (category, blame), xid


# --- nvidia-smi -q: SRAM Threshold Exceeded (nvmlEccSramErrorStatus_v1_t.bThresholdExceeded) ---

_SMI = """==============NVSMI LOG==============

Timestamp                                 : Mon Jan  1 00:00:00 2024
Driver Version                            : 550.54.15

Attached GPUs                             : 1
GPU 00000000:3B:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
        Aggregate
            SRAM Correctable              : 0
            SRAM Uncorrectable Parity     : 6
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
            SRAM Threshold Exceeded       : {threshold}
    Retired Pages
        Single Bit ECC                    : N/A
        Double Bit ECC                    : N/A
        Pending Page Blacklist            : N/A
"""


def test_smi_q_sram_threshold_exceeded_drains_the_node_and_no_stays_silent() -> None:
    got = explain_text(_SMI.replace("{threshold}", "Yes"))
    assert (got.category, got.blame, got.gpu) == ("gpu_hardware", "node", "0000:3b:00.0")
    healthy = explain_text(_SMI.replace("{threshold}", "No"))
    assert (healthy.category, healthy.blame) == (None, "unknown")


# --- CUDA strings as NCCL's CUDACHECK prints them: the CUDA string decides ---

_NCCL_CUDA = "gpu-01:1234:1300 [0] include/alloc.h:48 NCCL WARN Cuda failure {n}'{s}'\n"


@pytest.mark.parametrize(
    ("string", "category", "blame"),
    [
        ("an illegal memory access was encountered", "user_code", "job"),
        ("invalid program counter", "user_code", "job"),
        ("operation not supported on global/shared address space", "user_code", "job"),
        ("invalid device ordinal", "user_code", "job"),
        ("initialization error", "user_code", "job"),
        ("operation not permitted when stream is capturing", "user_code", "job"),
        ("unknown error", "gpu_hardware", "unknown"),
        ("out of memory", "oom_gpu", "job"),
        ("uncorrectable ECC error encountered", "gpu_hardware", "node"),
        ("all CUDA-capable devices are busy or unavailable", "node", "node"),
        ("uncorrectable NVLink error detected during the execution", "interconnect", "node"),
    ],
)
def test_nccls_cuda_failure_follows_the_cuda_string(string: str, category: str, blame: str) -> None:
    for n in ("", "700 "):  # older NCCL prints no number, newer 'Cuda failure %d '%s''
        got = explain_text(_NCCL_CUDA.format(n=n, s=string))
        assert (got.category, got.blame) == (category, blame), (n, string)


@pytest.mark.parametrize(
    "string",
    [
        "invalid device ordinal",
        "invalid program counter",
        "operation not supported on global/shared address space",
    ],
)
def test_cuda_strings_without_a_cuda_prefix_are_the_programs(string: str) -> None:
    # the usual checking macro prints cudaGetErrorString(err), file and line only
    got = explain_text(f"GPUassert: {string} train.cu 42\n")
    assert (got.category, got.blame) == ("user_code", "job")


# --- NCCL: init.cc / bootstrap.cc ncclInvalidArgument WARNs, net_ib/common.cc async events ---


@pytest.mark.parametrize(
    "warn",
    [
        "init.cc:2314 NCCL WARN Invalid config blocking attribute value 2",
        "init.cc:2330 NCCL WARN Invalid config min/max channels attribute value 64/32",
        "init.cc:2265 NCCL WARN ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER",
        "init.cc:2480 NCCL WARN improper usage of ncclCommInitRank: nId = 2, nranks=1",
        "init.cc:2501 NCCL WARN Invalid rank requested : 8/8",
        "init.cc:2596 NCCL WARN Invalid device count requested : 0",
        "init.cc:2607 NCCL WARN Invalid device 9 (totalnDev=8)",
        "init.cc:430 NCCL WARN Attempt to use communicator before the previous operation returned "
        "ncclSuccess",
        "init.cc:2895 NCCL WARN comm 0x55d0c8a0 has already been destroyed",
        "bootstrap.cc:114 NCCL WARN Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or "
        "[<ipv6>]:<port> or <hostname>:<port>",
        "bootstrap.cc:348 NCCL WARN Bootstrap Root : rank 3 of 8 ranks has already checked in",
    ],
)
def test_nccl_invalid_argument_warns_are_the_jobs(warn: str) -> None:
    got = explain_text(f"gpu-01:1234:1300 [0] {warn}\n")
    assert (got.category, got.blame) == ("user_code", "job")


def test_an_ib_port_error_is_the_fabric_at_the_host_that_logged_it() -> None:
    for line in (
        "gpu-04:111:222 [2] NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: port error(10)",
        "gpu-04:111:222 [2] NCCL WARN communicator encountered a fatal error (detected in "
        "ncclIbTest)",
    ):
        got = explain_text(line + "\n")
        assert (got.category, got.blame, got.node) == ("interconnect", "infra", "gpu-04"), line


def test_a_benign_ib_async_event_is_not_a_port_error() -> None:
    got = explain_text(
        "gpu-04:111:222 [2] NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: GID table "
        "change(18)\n"
    )
    assert got.blame != "infra"


# --- PyTorch: ProcessGroupGloo's connectFullMesh failure ---


def test_gloo_connect_full_mesh_names_the_remote_it_could_not_reach() -> None:
    head = "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/"
    got = explain_text(head + "tcp/pair.cc:211] Connection refused, remote=[gpu-09]:17308\n")
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "gpu-09")
    # a loopback address names no host (the README's placeholder rule)
    got = explain_text(head + "tcp/pair.cc:211] Connection refused, remote=[127.0.1.1]:17308\n")
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", None)
    got = explain_text(
        "[E ProcessGroupGloo.cpp:138] Gloo connectFullMesh failed with [../third_party/gloo/gloo/"
        "transport/tcp/pair.cc:144] no error\n"
    )
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", None)


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


# --- nccl-tests (src/common.h): CUDACHECK / NCCLCHECK lines, the CUDA string decides ---


@pytest.mark.parametrize(
    ("string", "category", "blame"),
    [
        ("out of memory", "oom_gpu", "job"),
        ("an illegal memory access was encountered", "user_code", "job"),
        ("uncorrectable ECC error encountered", "gpu_hardware", "node"),
        ("unknown error", "gpu_hardware", "unknown"),
        ("invalid device ordinal", "user_code", "job"),
    ],
)
def test_nccl_tests_cuda_failure_follows_the_cuda_string(
    string: str, category: str, blame: str
) -> None:
    got = explain_text(f"gpu-01: Test CUDA failure common.cu:892 '{string}'\n")
    assert (got.category, got.blame, got.node) == (category, blame, "gpu-01")


def test_an_nccl_internal_error_yields_to_the_last_error_behind_it() -> None:
    head = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the NCCL "
        "developers, NCCL version 2.19.3\nncclInternalError: Internal check failed.\n"
    )
    alone = explain_text(head)
    assert (alone.category, alone.blame, alone.node) == ("interconnect", "unknown", None)
    oom = explain_text(head + "Last error:\nCuda failure 2 'out of memory'\n")
    assert (oom.category, oom.blame) == ("oom_gpu", "job")
    ib = explain_text(
        head + "Last error:\nNET/IB : Got completion from peer 10.0.0.9<1234> with error 12, "
        "opcode 0, len 0, vendor err 129 (Recv)\n"
    )
    assert (ib.category, ib.blame) == ("interconnect", "infra")


# --- serving engines: vLLM's worker and SGLang's model runner at start ---


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: Free memory on device cuda:0 (7.34/15.49 GiB) on startup is less than "
        "desired GPU memory utilization (0.8, 12.39 GiB). Decrease GPU memory utilization or "
        "reduce GPU memory used by other processes.",
        "ValueError: Free memory on device (3.27/15.98 GiB) on startup is less than desired GPU "
        "memory utilization (0.9, 14.39 GiB)",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    ],
)
def test_serving_engines_gpu_memory_at_start_is_the_jobs_gpu_oom(line: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame) == ("oom_gpu", "job")


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
