"""Round ten: a CHECK_EQ on an NCCL call (glog's and dmlc-core's `Check failed: x == y (X vs.
Y)`, as Caffe's NCCL_CHECK and MXNet's NCCL operators use it) prints the ncclResult_t as its
number, which is then the only word for the error. Made-up values, never a corpus case."""

from __future__ import annotations

import pytest

from collector.parse.joblog import parse_job_text
from correlator.explain import explain_text
from correlator.explain.reasoning import conclude, findings

# ncclResult_t (nccl.h): what each number reads as, by the rules for its named form
BY_CODE = [
    (1, ("user_code", "job")),  # ncclUnhandledCudaError
    (2, ("interconnect", "unknown")),  # ncclSystemError
    (3, ("interconnect", "unknown")),  # ncclInternalError
    (4, ("user_code", "job")),  # ncclInvalidArgument
    (5, ("user_code", "job")),  # ncclInvalidUsage
    (6, ("interconnect", "unknown")),  # ncclRemoteError
]


def _live(text: str) -> tuple[str | None, str] | None:
    got = conclude(findings(parse_job_text(text, node="gpu-07", suspects=True)))
    return None if got is None else (got.verdict.category, got.verdict.blame)


@pytest.mark.parametrize(("code", "want"), BY_CODE)
def test_a_glog_check_on_an_nccl_result_reads_by_its_number(
    code: int, want: tuple[str, str]
) -> None:
    line = (
        f"F0312 08:14:02.511201 40211 parallel.cpp:118] Check failed: result == ncclSuccess "
        f"({code} vs. 0) NCCL Reduce failed!"
    )
    got = explain_text(line)
    assert (got.category, got.blame) == want
    assert _live(line) == want  # the agent's job-log path reads it the same way


def test_a_dmlc_check_with_the_operands_reversed_reads_by_the_number_on_the_right() -> None:
    line = "[08:14:02] src/kvstore/comm.h:412: Check failed: ncclSuccess == ret (0 vs. 1) : "
    got = explain_text(line)
    assert (got.category, got.blame) == ("user_code", "job")


def test_a_check_on_another_librarys_result_is_not_read_as_an_nccl_error() -> None:
    # CUDA's 2 is cudaErrorMemoryAllocation, a count is a count: only ncclSuccess's operand is
    # an ncclResult_t
    cuda = explain_text("Check failed: e == cudaSuccess (2 vs. 0) ")
    assert cuda.category != "interconnect"
    assert explain_text("Check failed: rank_count == world (1 vs. 0)").category is None


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("we keep getting Xid 79 on gpu-07 since the upgrade", ("gpu_hardware", "node")),
        ("XID 48 (DBE) on GPU 2", ("gpu_hardware", "node")),
        ("GPU has an XID 94 error", ("gpu_hardware", "node")),
        ("Xid=79 reported by the monitor", ("gpu_hardware", "node")),
        ("Xid 13: Graphics Engine Exception", ("user_code", "job")),  # the catalog's app bucket
    ],
)
def test_an_xid_quoted_in_words_reads_by_the_catalog_with_less_confidence(
    text: str, want: tuple[str, str]
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == want
    assert got.confidence <= 0.5  # second-hand: less sure than the driver's own line
    kernel = explain_text("NVRM: Xid (PCI:0000:3b:00): 79, pid=2841, name=python, GPU has fallen")
    assert kernel.confidence > got.confidence


@pytest.mark.parametrize(
    "text",
    [
        "there is no Xid 79 in dmesg",  # a quoted absence
        "not Xid 79, something else",
        "Xid 999 on gpu 3",  # not in the catalog
        "xid=79 in the postgres sense",  # only NVIDIA's spelling (Xid, XID) is an Xid
    ],
)
def test_an_absent_uncatalogued_or_lower_case_xid_quote_gives_nothing(text: str) -> None:
    assert explain_text(text).category is None


def test_a_failure_the_text_shows_outranks_an_xid_it_quotes() -> None:
    text = (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "(the admins say the node had an Xid 79 last week)"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("user_code", "job")


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("RuntimeError: HIP error: hipErrorOutOfMemory", ("oom_gpu", "job")),
        (
            '"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"',
            ("user_code", "job"),
        ),
        ("hip_check failed: hipErrorIllegalAddress at kernel.cpp:42", ("user_code", "job")),
        ("HIP error: hipErrorECCNotCorrectable", ("gpu_hardware", "node")),
        ("hipErrorNoDevice: no ROCm-capable device is detected", ("node", "node")),
    ],
)
def test_a_hip_error_reads_as_its_cuda_counterpart(line: str, want: tuple[str, str]) -> None:
    got = explain_text(line)
    assert (got.category, got.blame) == want
    assert _live(line) == want


@pytest.mark.parametrize(
    "line",
    [
        "[2025-02-03T04:05:06.789] Batch JobId=41235 missing from batch node gpu-b17 (not found "
        "BatchStartTime after startup)",
        "[2025-02-03T04:05:06.789] Node gpu-b17 rebooted, killing missing step 41235.0",
        "[2025-02-03T04:05:06.789] node gpu-b17 not resumed by ResumeTimeout(600) - marking down "
        "and power_save",
    ],
)
def test_slurmctld_naming_a_node_that_lost_its_job_blames_that_node(line: str) -> None:
    got = explain_text(line + "\nslurm-41235.out: NCCL watchdog timeout on gpu-a02")
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-b17")


@pytest.mark.parametrize(
    ("line", "want", "surer_than"),
    [
        (
            "[Mar 02 2025 11:12:13] [ERROR] [tid 4410] detected NVSwitch fatal error 20034 "
            "on fid 0 on NVSwitch pci bus id 00000000:07:00.0 physical id 1 port 40",
            ("interconnect", "node"),
            0.7,
        ),
        (
            "Mar 02 11:12:13 hgx-04 nv-fabricmanager[2210]: detected NVSwitch non-fatal error "
            "12028 on NodeId 0 on NVSwitch pci bus id 00000000:07:00.0 physical id 1 port 40",
            ("interconnect", "node"),
            0.0,
        ),
        (
            "[Mar 02 2025 11:12:13] [ERROR] [tid 4410] failed to find the GPU handle 1234567 in "
            "the multicast team request setup 7654321.",
            ("interconnect", "node"),
            0.0,
        ),
    ],
)
def test_fabric_managers_nvswitch_errors_read_as_the_nodes_fabric(
    line: str, want: tuple[str, str], surer_than: float
) -> None:
    got = explain_text(line)
    assert (got.category, got.blame) == want
    assert got.confidence > surer_than


def test_fabric_managers_healthy_multicast_lines_are_not_failures() -> None:
    text = (
        "[Mar 02 2025 11:12:13] [INFO] [tid 1808] multicast group 0 is allocated.\n"
        "[Mar 02 2025 11:12:13] [INFO] [tid 1808] successfully setup multicast team for request "
        "id 8331980469606044544."
    )
    assert explain_text(text).category is None


@pytest.mark.parametrize(
    ("line", "want"),
    [
        # TensorFlow's stream executor: a CHECK on the driver call, the CUresult on the right
        (
            "F0301 10:00:00.000000 41 cuda_driver.cc:1163] Check failed: CUDA_SUCCESS == "
            "cuCtxSynchronize() (0 vs. 700)",
            ("user_code", "job"),
        ),
        # Caffe's CUDA_CHECK without its string
        (
            "F0301 10:00:00.000000 41 syncedmem.cpp:71] Check failed: error == cudaSuccess "
            "(2 vs. 0)",
            ("oom_gpu", "job"),
        ),
        ("Check failed: error == cudaSuccess (214 vs. 0) ", ("gpu_hardware", "node")),
        ("Check failed: error == cudaSuccess (100 vs. 0) ", ("node", "node")),
    ],
)
def test_a_check_on_a_cuda_call_reads_by_the_error_number(line: str, want: tuple[str, str]) -> None:
    got = explain_text(line)
    assert (got.category, got.blame) == want
    assert _live(line) == want


def test_a_cuda_check_with_an_unlisted_number_is_left_to_the_other_rules() -> None:
    assert explain_text("Check failed: error == cudaSuccess (7 vs. 0) ").category is None


def test_nccls_collective_size_mismatch_is_the_programs_not_the_networks() -> None:
    line = (
        "gpu-a03:5120:5190 [2] NCCL WARN NET/IB : req 0/1 tag 1c peer 10.8.0.12<47321> "
        "collective mismatch error, local size 4194304 remote size 2097152"
    )
    got = explain_text(line)
    assert (got.category, got.blame) == ("user_code", "job")
    assert _live(line) == ("user_code", "job")


@pytest.mark.parametrize(
    ("text", "node"),
    [
        (
            "NodeName=gpu-c04 Arch=x86_64\n   Reason=gpu xid 79 [root@2025-02-03T04:05:06]",
            "gpu-c04",
        ),
        (
            "slurmctld[880]: error: _slurm_rpc_node_registration node=gpu-c04: Invalid argument",
            "gpu-c04",
        ),
        (
            "Feb 03 04:05:06 gpu-c04 slurmd[1873]: fatal: Unable to determine this slurmd's "
            "NodeName",
            "gpu-c04",
        ),
    ],
)
def test_slurm_naming_a_node_out_of_service_blames_that_node(text: str, node: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", node)


def test_a_jobs_own_reason_is_not_a_node_reason() -> None:
    # scontrol show job's Reason= has no "[user@time]": a pending job's reason, not a drain
    assert explain_text("JobState=PENDING Reason=Priority Dependency=(null)").blame != "node"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (
            "[gpu-e11:40211] *** Process received signal ***\n"
            "[gpu-e11:40211] Signal: Aborted (6)\n[gpu-e11:40211] Signal code:  (-6)",
            ("user_code", "job"),
        ),
        (
            "[gpu-e11:40211] *** Process received signal ***\n"
            "[gpu-e11:40211] Signal: Floating point exception (8)",
            ("user_code", "job"),
        ),
    ],
)
def test_open_mpis_signal_handler_line_reads_by_its_signal(
    text: str, want: tuple[str, str]
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, "gpu-e11")
    assert _live(text) == want


def test_an_uncaught_cuda_exception_out_of_memory_is_the_gpus_memory_not_the_abort() -> None:
    text = (
        "terminate called after throwing an instance of 'cuda_error'\n"
        "  what():  src/alloc/CudaPool.cpp(88): error: out of memory\n"
        "[gpu-e11:40211] *** Process received signal ***\n"
        "[gpu-e11:40211] Signal: Aborted (6)"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("oom_gpu", "job", "gpu-e11")
    assert _live(text) == ("oom_gpu", "job")


def test_an_uncaught_host_allocation_failure_is_not_read_as_the_gpus() -> None:
    text = (
        "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc"
    )
    assert explain_text(text).category != "oom_gpu"


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: RuntimeError: "
            "Triton Error [CUDA]: out of memory",
            ("oom_gpu", "job"),
        ),
        (
            "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
            ("user_code", "job"),
        ),
        (
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: "
            "196608, Hardware limit: 166912. Reducing block sizes or `num_stages` may help.",
            ("user_code", "job"),
        ),
    ],
)
def test_tritons_own_errors_read_by_their_meaning(line: str, want: tuple[str, str]) -> None:
    got = explain_text(line)
    assert (got.category, got.blame) == want
    assert _live(line) == want


def test_a_nodes_own_link_local_ipv4_address_can_name_it_but_not_the_metadata_service() -> None:
    ray = (
        "Memory on the node (IP: {ip}, ID: 5b1e0c) where the task (actor ID: 0dab, name=Train.run, "
        "pid=308, memory used=11.15GB) was running was 12.49GB / 13.15GB (0.950003), which exceeds "
        "the memory usage threshold of 0.95. Ray killed this worker"
    )
    assert explain_text(ray.format(ip="169.254.20.7")).node == "169.254.20.7"
    assert explain_text(ray.format(ip="169.254.169.254")).node is None
    assert explain_text(ray.format(ip="fe80::1")).node is None  # scoped to an interface


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            "ip-10-0-7-12:4410:4410 [3] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't "
            "open AV. RC: -22, ERROR: Invalid argument",
            ("interconnect", "infra", "ip-10-0-7-12"),
        ),
        (
            "libfabric:4410:1708520807::efa:cq:efa_rdm_txe_handle_error():737<warn> err: 5, "
            "message: Invalid address My EFA addr: fi_addr_efa://[fe80::1]:0:1 My host id: "
            "i-0aa Peer EFA addr: fi_addr_efa://[fe80::2]:0:2 Peer host id: i-0bb (7)",
            ("interconnect", "infra", None),
        ),
        (
            "[17:36:58] src/storage/./pooled_storage_manager.h:111: cudaMalloc failed: out of "
            "memory",
            ("oom_gpu", "job", None),
        ),
        (
            "2017-11-13 10:31:59.958338: W tensorflow/core/framework/op_kernel.cc:1192] Resource "
            "exhausted: OOM when allocating tensor with shape[15,8,183,183]",
            ("oom_gpu", "job", None),
        ),
    ],
)
def test_round_elevens_emitter_formats_read_by_their_meaning(
    line: str, want: tuple[str, str, str | None]
) -> None:
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == want
    assert _live(line) == want[:2]


def test_tensorflows_cpu_oom_stays_the_hosts_memory() -> None:
    line = (
        "Resource exhausted: OOM when allocating tensor with shape[1024,1024] and type float on "
        "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu"
    )
    assert explain_text(line).category == "oom_host"


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            "paddle.fluid.core_avx.EnforceNotMet: (External) CUDA error(2), out of memory.",
            ("oom_gpu", "job"),
        ),
        (
            "[1,0]<stderr>:gloo::EnforceNotMet: [enforce fail at external/gloo/gloo/transport/tcp/"
            "pair.cc:446] op.preamble.length <= op.nbytes. 8 vs 4",
            ("user_code", "job"),
        ),
    ],
)
def test_paddles_cuda_oom_and_gloos_size_mismatch_read_by_their_meaning(
    line: str, want: tuple[str, str]
) -> None:
    got = explain_text(line)
    assert (got.category, got.blame) == want
    assert _live(line) == want
