"""Every nvmlReturn_t, as pynvml raises it, against the explain rules (nvidia_smi.json).

The codes: nvml.h's nvmlReturn_t (NVML API docs, group__nvmlDeviceEnumvs), their nvmlErrorString
texts (as nvidia-ml-py's pynvml NVMLError._errcode_to_string holds them, 1-21 and 999; 22-29 as
the library returns them) and pynvml's exception classes (_extractNVMLErrorsAsClasses:
NVML_ERROR_GPU_IS_LOST -> NVMLError_GpuIsLost), printed by Python as "pynvml.NVMLError_<Name>:
<text>" (or under pynvml.nvml) at the end of a traceback, or logged by a program that caught it.
The verdicts are nvidia_smi.json's: the GPU itself (lost, reset required, corrupt infoROM, power),
the node's driver stack, the caller's usage (low confidence) or its environment (not settled).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

HW = frozenset({("gpu_hardware", "node")})
NODE = frozenset({("node", "node")})
USAGE = frozenset({("user_code", "job")})
ENV = frozenset({("node", "unknown")})
NOTHING = frozenset({(None, "unknown")})

# number: (pynvml class suffix, nvmlErrorString text, verdicts)
CODES: dict[int, tuple[str, str, frozenset[tuple[str | None, str]]]] = {
    1: ("Uninitialized", "Uninitialized", USAGE),
    2: ("InvalidArgument", "Invalid Argument", USAGE),
    # an unsupported query is no failure (test_rules_emitters_round22.py): many GPUs lack a field
    3: ("NotSupported", "Not Supported", NOTHING),
    4: ("NoPermission", "Insufficient Permissions", ENV),
    5: ("AlreadyInitialized", "Already Initialized", USAGE),
    6: ("NotFound", "Not Found", USAGE),
    7: ("InsufficientSize", "Insufficient Size", USAGE),
    8: ("InsufficientPower", "Insufficient External Power", HW),
    9: ("DriverNotLoaded", "Driver Not Loaded", NODE),
    10: ("Timeout", "Timeout", ENV),
    11: ("IrqIssue", "Interrupt Request Issue", NODE),
    12: ("LibraryNotFound", "NVML Shared Library Not Found", NODE),
    13: ("FunctionNotFound", "Function Not Found", ENV),
    14: ("CorruptedInforom", "Corrupted infoROM", HW),
    15: ("GpuIsLost", "GPU is lost", HW),
    16: ("ResetRequired", "GPU requires restart", HW),
    17: ("OperatingSystem", "The operating system has blocked the request.", ENV),
    18: ("LibRmVersionMismatch", "RM has detected an NVML/RM version mismatch.", NODE),
    19: ("InUse", "The GPU is currently in use", ENV),
    20: ("Memory", "Insufficient Memory", ENV),
    21: ("NoData", "No data", USAGE),
    22: ("VgpuEccNotSupported", "Requested vgpu operation not available with ECC enabled", USAGE),
    23: ("InsufficientResources", "Insufficient Resources", ENV),
    24: ("FreqNotSupported", "Frequency not supported", USAGE),
    25: ("ArgumentVersionMismatch", "Argument version mismatch", USAGE),
    26: ("Deprecated", "Deprecated", USAGE),
    27: ("NotReady", "Not Ready", ENV),
    28: ("GpuNotFound", "GPU not found", ENV),
    29: ("InvalidState", "Invalid state", ENV),
    # nvidia_smi.json pynvml_unknown: the node's GPU stack
    999: ("Unknown", "Unknown Error", NODE),
}
_CALLS = ("nvmlDeviceGetHandleByIndex(0)", "nvmlDeviceGetMemoryInfo(handle)", "nvmlInit()")
TEMPLATES = (
    (
        "traceback",
        'Traceback (most recent call last):\n  File "/app/monitor.py", line 41, in <module>\n'
        "    info = pynvml.{call}\n{module}.NVMLError_{name}: {text}\n",
    ),
    ("logged", "WARNING:monitor:NVML query failed: NVMLError_{name}: {text}\n"),
)


def _probes() -> list[object]:
    out: list[object] = []
    for i, (num, (name, text, ok)) in enumerate(CODES.items()):
        for key, template in TEMPLATES:
            line = template.format(
                call=_CALLS[i % 3], module=("pynvml", "pynvml.nvml")[i % 2], name=name, text=text
            )
            out.append(pytest.param(line, ok, id=f"{key}-{num}"))
    return out


@pytest.mark.parametrize(("text", "ok"), _probes())
def test_an_nvml_error_reads_as_nvidia_smi_json_documents(
    text: str, ok: frozenset[tuple[str | None, str]]
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) in ok, (text, got.explanation)


@pytest.mark.parametrize("key", [key for key, _ in TEMPLATES])
def test_nvml_unknown_is_the_nodes_gpu_stack_not_the_program_nor_a_gpu_fault_so_low_confidence(
    key: str,
) -> None:
    # nvml.h: NVML_ERROR_UNKNOWN "An internal driver error occurred"; NVIDIA's notice
    # (nvidia-container-toolkit #48) traces it in containers to the node's runtime, the device
    # plugin marks devices unhealthy on it, gpud reads only GPU_IS_LOST / RESET_REQUIRED as the
    # GPU's own fault: the node's, not which part of it (nvidia_smi.json pynvml_unknown)
    template = dict(TEMPLATES)[key]
    text = template.format(call=_CALLS[0], module="pynvml", name="Unknown", text="Unknown Error")
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "node")
    assert got.confidence < 0.5


@pytest.mark.parametrize(
    "text",
    [
        "root@train-0:/workspace# nvidia-smi\nFailed to initialize NVML: Unknown Error\n",
        "E0412 10:00:00.000000 1 main.go:123] Failed to initialize NVML: ERROR_UNKNOWN\n",
    ],
)
def test_nvml_init_unknown_error_is_the_nodes_runtime_or_driver_not_a_missing_library(
    text: str,
) -> None:
    # NVIDIA/nvidia-container-toolkit#48: a container whose GPUs the node's runtime detached;
    # a missing library is NVML_ERROR_LIBRARY_NOT_FOUND, not this code (nvidia_smi.json)
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "node")
    assert "detached" in got.explanation and "library cannot be loaded" not in got.explanation
    assert got.confidence <= 0.5
