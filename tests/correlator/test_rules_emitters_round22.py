"""Round twenty-two: NVML errors as NVIDIA's Python binding raises them. pynvml.py (nvidia-ml-py,
installed with this project) makes each NVML_ERROR_* an NVMLError_<CamelCase> class whose str is
nvmlErrorString's text; the class names and texts below are read from that module, not typed in,
and the verdicts follow nvmlReturn_t's documented meanings (correlator/rules/emitters/
nvidia_smi.json). Never a corpus case."""

from __future__ import annotations

import pynvml
import pytest

from correlator.explain import explain_text

_WANT = {
    "NVML_ERROR_GPU_IS_LOST": ("gpu_hardware", "node"),
    "NVML_ERROR_RESET_REQUIRED": ("gpu_hardware", "node"),
    "NVML_ERROR_CORRUPTED_INFOROM": ("gpu_hardware", "node"),
    "NVML_ERROR_INSUFFICIENT_POWER": ("gpu_hardware", "node"),
    "NVML_ERROR_DRIVER_NOT_LOADED": ("node", "node"),
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": ("node", "node"),
    "NVML_ERROR_LIBRARY_NOT_FOUND": ("node", "node"),
    "NVML_ERROR_IRQ_ISSUE": ("node", "node"),
    "NVML_ERROR_UNKNOWN": ("node", "node"),
}
# a call the program chose to make that the GPU or driver does not offer is no failure of either
_NOT_A_FAULT = ("NVML_ERROR_NOT_SUPPORTED",)
_TRACEBACK = """\
Traceback (most recent call last):
  File "/opt/conda/lib/python3.11/site-packages/torch/cuda/__init__.py", line 1073, in _get_pynvml\
_handler
    handle = pynvml.nvmlDeviceGetHandleByIndex(device)
  File "/opt/conda/lib/python3.11/site-packages/pynvml.py", line 2604, in nvmlDeviceGetHandleByIndex
    _nvmlCheckReturn(ret)
  File "/opt/conda/lib/python3.11/site-packages/pynvml.py", line 1042, in _nvmlCheckReturn
    raise NVMLError(ret)
{last}
"""
# a bare traceback, torchrun's per-rank prefix, srun --label's
_DELIVERIES = ("", "[rank3]: ", "3: ")


def _raised(code_name: str) -> str:
    """The exception line pynvml's NVMLError_<Name> prints for NVML_ERROR_<NAME>."""
    err = pynvml.NVMLError(getattr(pynvml, code_name))
    text = pynvml.NVMLError._errcode_to_string.get(err.value, "Unknown Error")
    return f"pynvml.{type(err).__name__}: {text}"


@pytest.mark.parametrize("prefix", _DELIVERIES)
@pytest.mark.parametrize(("code_name", "want"), sorted(_WANT.items()))
def test_an_nvml_error_raised_by_pynvml_reads_as_nvml_documents_it(
    code_name: str, want: tuple[str, str], prefix: str
) -> None:
    text = "".join(
        prefix + ln + "\n" for ln in _TRACEBACK.format(last=_raised(code_name)).split("\n")[:-1]
    )
    got = explain_text(text)
    assert (got.category, got.blame) == want, (code_name, got.explanation)
    assert got.node is None  # a rank or task label is not a host


@pytest.mark.parametrize("code_name", _NOT_A_FAULT)
def test_an_unsupported_nvml_query_is_no_failure(code_name: str) -> None:
    got = explain_text(_raised(code_name) + "\n")
    assert got.category is None, got.explanation


def test_the_class_names_read_are_pynvmls_own() -> None:
    # the probes above use the binding's own class names; pin the ones the rules name
    assert _raised("NVML_ERROR_UNKNOWN") == "pynvml.NVMLError_Unknown: Unknown Error"
    assert _raised("NVML_ERROR_GPU_IS_LOST") == "pynvml.NVMLError_GpuIsLost: GPU is lost"
