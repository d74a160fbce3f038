"""Round six of the emitter families, hardware and transport half: the coverage audit of each
family against its emitter's full message list.

Each line is an emitter's format string (quoted in its family's `sources`) filled in with made-up
values, never a corpus case: DCGM's field-violation messages (nvvs/src/DcgmRecorder.cpp with the
field tags of dcgm_fields.cpp), `nvidia-smi -q`'s SRAM threshold field, CUDA's cudaGetErrorString
strings as NCCL's CUDACHECK prints them, NCCL's init/bootstrap ncclInvalidArgument WARNs and IB
async events (src/init.cc, src/bootstrap.cc, src/transport/net_ib/common.cc), PyTorch's Gloo
connectFullMesh failure (ProcessGroupGloo.cpp), nccl-tests' CUDACHECK lines, and serving engines at
start. The scheduler half, the multi-host rule and mlx5's link down (which uses its timeouts)
are in test_rules_emitters_round6_jobs.py.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

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
