"""NVIDIA Triton Inference Server, an emitter family no rule covered before probe set nineteen
(issue #11).

Formats, from its own source:
- triton-inference-server/core @73aad7c334 src/cuda_utils.cc "unable to get number of CUDA
  devices: %s", "unable to get memory info for device %d: %s", "unable to get CUDA device
  properties for GPU ID%d: %s" (cudaGetErrorString); src/model_config_utils.cc "instance group %s
  of model %s specifies invalid or unsupported gpu id %d. GPUs with at least the minimum required
  CUDA compute compatibility of %f are: %s"; src/model_repository_manager/model_lifecycle.cc
  "failed to load '%s' version %d: %s" (triton-inference-server/common src/error.cc AsString
  "Internal: ..."), behind common/src/logging.cc's "E0607 10:23:45.123456 <pid> <file>:<line>] ".


Verdicts by the label policy (tests/fixtures/corpus/README.md): Triton failing to count or query
the GPUs with a driver-state CUDA error is node / node; a model config naming a GPU the server
lacks is the model's (user_code / job), unless the server sees no usable GPU at all (node /
unknown); a model that failed to load for a reason the line reads elsewhere keeps that reading.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

CUDA_UTILS = "triton-inference-server/core src/cuda_utils.cc@73aad7c334"
CONFIG_UTILS = "triton-inference-server/core src/model_config_utils.cc@73aad7c334"
LIFECYCLE = "triton-inference-server/core src/model_repository_manager/model_lifecycle.cc"

NODE = ("node", "node")
NODE_UNKNOWN = ("node", "unknown")
JOB = ("user_code", "job")
OOM_GPU = ("oom_gpu", "job")
NONE = (None, "unknown")

_TLOG = (
    "E0607 10:23:45.123456 1 model_lifecycle.cc:654] failed to load '{model}' version {v}: ",
    "E1106 08:01:02.000031 412 model_repository_manager.cc:1307] failed to load '{model}' "
    "version {v}: ",
    "",
)
_T = {"model": ("resnet50", "llama-3-8b", "bert_onnx"), "v": (1, 3)}
_DRIVER_STATE = (
    "unknown error",
    "initialization error",
    "system not yet initialized",
    "OS call failed or operation not supported on this OS",
    "CUDA-capable device(s) is/are busy or unavailable",
    "system has unsupported display driver / cuda driver combination",
)
TRITON = [
    Fmt(
        "triton-device-count-failed",
        CUDA_UTILS,
        "Internal: unable to get number of CUDA devices: {err}\n",
        {**_T, "err": _DRIVER_STATE},
        NODE,
        prefixes=_TLOG,
    ),
    Fmt(
        "triton-device-query-failed",
        CUDA_UTILS,
        "Internal: unable to get {what}: {err}\n",
        {
            **_T,
            "what": ("memory info for device 0", "CUDA device properties for GPU ID1"),
            "err": ("unknown error", "initialization error", "no CUDA-capable device is detected"),
        },
        NODE,
        prefixes=_TLOG,
    ),
    Fmt(
        "triton-gpu-id-none-usable",
        CONFIG_UTILS,
        "Invalid argument: instance group {model}_0 of model {model} specifies invalid or "
        "unsupported gpu id {gid}. GPUs with at least the minimum required CUDA compute "
        "compatibility of 6.000000 are: \n",
        {**_T, "gid": (0, 1)},
        NODE_UNKNOWN,
        prefixes=_TLOG,
    ),
    Fmt(
        "triton-gpu-id-not-present",
        CONFIG_UTILS,
        "Invalid argument: instance group {model}_0 of model {model} specifies invalid or "
        "unsupported gpu id {gid}. GPUs with at least the minimum required CUDA compute "
        "compatibility of 6.000000 are: {ids}\n",
        {**_T, "gid": (1, 4, 7), "ids": ("0", "0, 1, 2, 3")},
        JOB,
        prefixes=_TLOG,
    ),
    Fmt(
        "triton-load-failed-gpu-oom",
        LIFECYCLE,
        "Internal: {what}\n",
        {
            **_T,
            "what": (
                "Failed to allocate CUDA memory with byte size 268435456 on GPU 0: "
                "CNMEM_STATUS_OUT_OF_MEMORY",
                "PyTorch execute failure: CUDA out of memory. Tried to allocate 20.00 MiB",
            ),
        },
        OOM_GPU,
        prefixes=_TLOG,
    ),
    Fmt(
        "triton-load-failed-no-cause",
        LIFECYCLE,
        "{what}\n",
        {
            **_T,
            "what": (
                "Invalid argument: unexpected inference output 'logits', allowed outputs are: "
                "output_0",
                "Not found: unable to load shared library: libtriton_foo.so",
                "Internal: failed to load all models",
            ),
        },
        NONE,
        prefixes=_TLOG,
    ),
]


FORMATS = [*TRITON]


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_each_triton_format_reads_as_its_emitter_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params([f for f in FORMATS if f.culprit is None]))
def test_a_triton_line_that_names_no_host_blames_none(f: Fmt, text: str, node: str | None) -> None:
    assert explain_text(text).node is None, text


BENIGN = (
    # Triton loading models and pools
    "I0607 10:23:45.123456 1 model_lifecycle.cc:849] successfully loaded 'resnet50'",
    "I0607 10:23:45.123456 1 cuda_memory_manager.cc:107] CUDA memory pool is created on device 0 "
    "with size 67108864",
    "I0607 10:23:45.123456 1 pinned_memory_manager.cc:277] Pinned memory pool is created at "
    "'0x7f1c2a000000' with size 268435456",
)


@pytest.mark.parametrize("text", BENIGN)
def test_a_benign_triton_line_is_no_failure(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), got.explanation
