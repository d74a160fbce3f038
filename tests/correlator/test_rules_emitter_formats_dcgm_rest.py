"""The rest of DCGM's DCGM_FR_* messages: every code test_rules_emitter_formats_dcgm.py leaves out.

Formats: dcgmlib/dcgm_errors.h (NVIDIA/DCGM @ DCGM_COMMIT), severities from
dcgmlib/src/dcgm_errors.c (dcgmErrorMeta: MONITOR or ISOLATE). A code that names a fault, a
setting or a resource is read as dcgm.json documents it (ISOLATE on a setting of the node: the
node's; MONITOR with the SYSTEM_TRIAGE next step: the GPU's, not settled). The diagnostic's own
bookkeeping (a test skipped, aborted or unsupported, a field it could not query, an internal or
API error of its own) says nothing failed on the GPU or in the job: it is pinned as read as no
fault at all. Codes whose *_MSG is empty ("see message inplace": the EUD codes 89-95, 97, 108,
124, 130) print text of their own and are not enumerated; DCGM_FR_NCCL_ERROR (129) quotes NCCL's
text (NCCL family).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params
from tests.correlator.test_rules_emitter_formats_dcgm import (
    G_NODE,
    G_UNKNOWN,
    NET_NODE,
    NODE,
    _p2p,
    dcgm,
)

NODE_UNKNOWN = ("node", "unknown")
_TS_TAGS = ("power_violation", "thermal_violation", "ecc_sbe_volatile_total")
_NVL_TAGS = ("nvlink_crc_flit_error_count_total", "nvlink_crc_data_error_count_total")

REST = [
    dcgm("nvml-lib-bad", 24, "Cannot get pointer to {f} from libnvidia-ml.so", NODE,
         f=("nvmlDeviceGetRemappedRows", "nvmlDeviceGetFieldValues")),
    dcgm("graphics", 25, "NVVS has detected processes with graphics contexts open running on at "
         "least one GPU. This may cause some tests to fail.", NODE_UNKNOWN),
    dcgm("cuda-env", 28, "Found CUDA performance-limiting environment variable '{v}'.",
         NODE_UNKNOWN, v=("CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS")),
    dcgm("latency", 31, "Latency type {t} of GPU {gpu} value {x} exceeded maximum allowed latency "
         "of {y}.", G_UNKNOWN, t=("h2d", "d2h", "bidir"), x=("12.50", "3.01"), y=("8.00",)),
    dcgm("violation", 33, "Detected {n} {tag} for GPU {gpu}", G_UNKNOWN, n=(1, 4),
         tag=("power_violation", "thermal_violation")),
    dcgm("threshold", 34, "Detected {n} {tag} for GPU {gpu} which is above the threshold {t}",
         G_UNKNOWN, n=(12, 700), tag=("power_violation", "gpu_temp"), t=(4, 650)),
    dcgm("violation-dbl", 35, "Detected {x} {tag} for GPU {gpu}", G_UNKNOWN, x=("93.5", "0.5"),
         tag=("gpu_temp", "power_usage")),
    dcgm("threshold-ts", 38, "{tag} met or exceeded the threshold of {t} per second: {v} at {s} "
         "seconds into the test.", G_UNKNOWN, tag=_TS_TAGS, t=(100, 5), v=(412, 9),
         s=("12.0", "301.5")),
    # an NVLink field's rate is DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD's reading
    dcgm("threshold-ts-nvlink", 38, "{tag} met or exceeded the threshold of {t} per second: {v} "
         "at {s} seconds into the test.", NET_NODE, tag=_NVL_TAGS, t=(100,), v=(412, 9000),
         s=("12.0",)),
    dcgm("threshold-ts-dbl", 39, "{tag} met or exceeded the threshold of {t} per second: {v} at "
         "{s} seconds into the test.", G_UNKNOWN, tag=("power_usage", "memory_temp"),
         t=("700.0", "85.0"), v=("712.5", "91.0"), s=("30.5", "0.0")),
    dcgm("clocks-event", 43, "Clocks event for GPU {gpu} because of clocks event starting {s} "
         "seconds into the test. {d}", G_UNKNOWN, s=("12.0", "0.5"),
         d=("HW Slowdown is engaged", "Power Brake Slowdown is engaged", "")),
    dcgm("cuda-api", 51, "Error using CUDA API {f}", G_UNKNOWN,
         f=("cudaMalloc", "cuCtxCreate", "cudaMemcpy")),
    dcgm("ecc-disabled", 55, "Skipping test {t} because ECC is not enabled on GPU {gpu}", NODE,
         t=("Memory", "memtest", "pulse_test")),
    dcgm("mem-alloc", 56, "Couldn't allocate at least {x}% of GPU memory on GPU {gpu}", G_UNKNOWN,
         x=("90.0", "75.5")),
    dcgm("api-fail-gpu", 65, "API call {f} failed for GPU {gpu}: '{e}'", G_UNKNOWN,
         f=("cudaSetDevice", "cuMemAlloc", "nvmlDeviceGetClockInfo"),
         e=("unknown error", "out of memory", "Not Supported")),
    dcgm("host-alloc", 73, "Cannot allocate {n} bytes on the host", ("oom_host", "unknown"),
         n=(1073741824, 4096)),
    dcgm("imex", 122, "IMEX {what} status is {st} ({d})", ("interconnect", "unknown"),
         what=("domain", "daemon"), st=("DEGRADED", "DOWN", "UNAVAILABLE"),
         d=("unhealthy", "not running")),
    dcgm("xid", 101, "Detected XID {x} for GPU {gpu}", G_NODE, x=(79, 48)),
    _p2p(114, "GPU {gpu} unsuccessfully wrote data to GPU {peer} over PCIe in a peer-to-peer test: "
         "{test}"),
    _p2p(115, "GPU {gpu} was unsuccessfully written to by GPU {peer} over NVLink in a peer-to-peer "
         "test: {test}"),
    # deprecated (NOT USED) but still in the header
    dcgm("switch-down", 17, "NvSwitch physical ID {sw}'s NvLink port {p} is currently down.",
         NET_NODE, sw=(0, 3), p=(12, 47)),
    dcgm("switch-link-down", 88, "NVSwitch {sw}'s NvLink {p} is down.", NET_NODE, sw=(2, 5),
         p=(17, 0)),
    dcgm("hostengine", 26, "Could not connect to the host engine: '{e}'", NODE,
         e=("Host engine connection invalid/disconnected",)),
]  # fmt: skip

# The diagnostic's own bookkeeping, rendered with sample values: no fault is said
BOOKKEEPING = [
    "Unknown error.",  # 1
    "Unrecognized error code.",  # 2
    "File /usr/share/nvidia-validation-suite/x could not be accessed directly: Permission denied",
    "Bad parameter to function GetFieldValues cannot be processed",  # 21
    "Could not query field gpu_temp for GPU 3",  # 27
    "Unable to get field information for field id 155",  # 32
    "Field dev_name is not supported by this API because it is neither an int64 nor a double "
    "type.",  # 37
    "There was an internal error during the test: 'Couldn't find the plugin'",  # 44
    "Test was aborted early due to user signal",  # 47
    "The Targeted Stress test is skipped.",  # 48
    "Unable to generate / collect stat power_usage for GPU 3",  # 49
    "Unable to add field watches to DCGM: Max limit reached for the object",  # 53
    "ECC Memory is not turned on or is unsupported. Skipping test.",  # 60
    "API call dcgmGroupCreate failed: 'Setting not configured'",  # 64
    "Error using DCGM API dcgmGetLatestValuesForFields",  # 67
    "Unable to run concurrent pair bandwidth test without 2 or more gpus. Skipping",  # 68
    "This API can only return up to four errors per system. Additional errors were found for "
    "this system that couldn't be communicated.",  # 69
    "Enforced power limit on GPU 3 set to 300.0, which is too low to attempt to achieve target "
    "power 700.0",  # 72
    "Skipping plugin due to a GPU being in GPU Operating Mode: LOW_DP.",  # 74
    "No memory clocks <= 1215 MHZ were found in 4 supported memory clocks.",  # 75
    "No graphics clocks <= 1410 MHZ were found in 80 supported graphics clocks for memory clock "
    "1215 MHZ.",  # 76
    "Had to restore GPU state on NVML GPU(s): 3",  # 77
    "This card does not support the L1 cache test. Skipping test.",  # 78
    "No valid GPUs passed to plugin",  # 82
    "The DCGM Diagnostic does not have permissions to create a file in directory '/tmp/dcgm'",
    "Test diagnostic was skipped.",  # 117
]


@pytest.mark.parametrize(("fmt", "text", "node"), params(REST))
def test_the_rest_of_dcgms_messages_read_as_dcgm_json_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)


@pytest.mark.parametrize("line", BOOKKEEPING)
def test_a_dcgm_diagnostics_own_bookkeeping_is_not_read_as_a_fault(line: str) -> None:
    got = explain_text(f"| Warning                   | {line}\n")
    assert got.category is None, (line, got.explanation)
