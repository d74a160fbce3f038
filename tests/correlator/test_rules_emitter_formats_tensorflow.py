"""TensorFlow's collective executor abort and timeout reports (probe set ten).

Formats: tensorflow/tensorflow @c117e91ab7 (tensorflow/core/common_runtime/
base_collective_executor.cc: ExecuteAsync's and CompleteParamsAsync's DEADLINE_EXCEEDED timeouts,
StartAbort's LOG(ERROR) "BaseCollectiveExecutor::StartAbort <status>" and the status it wraps,
"Collective ops is aborted by: <first error>\\nThe error could be from a previous operation.
Restart your program to reset."); TF's C++ log prefix "%Y-%m-%d %H:%M:%S.%06d: E <file>:<line>] "
and the Python errors_impl exception names the status codes map to.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

TF = "tensorflow/tensorflow tensorflow/core/common_runtime/base_collective_executor.cc@c117e91ab7"
HANG = ("nccl_timeout_unknown", "unknown")
_TIMEOUTS = (
    "Collective has timed out during execution.",
    "Collective has timed out waiting for other workers.",
)
_RESET = "The error could be from a previous operation. Restart your program to reset."
# TF's C++ logging prefix; a multi-worker launcher's "[worker-N] " and srun's "N: "
_CC_PREFIXES = (
    "2024-02-03 04:05:06.{us}: E tensorflow/core/common_runtime/base_collective_executor.cc:"
    "{line}] ",
    "[worker-{task}] 2024-02-03 04:05:06.{us}: E tensorflow/core/common_runtime/"
    "base_collective_executor.cc:{line}] ",
    "{task}: 2024-02-03 04:05:06.{us}: E tensorflow/core/common_runtime/"
    "base_collective_executor.cc:{line}] ",
)
_PY_PREFIXES = ("", "[worker-{task}] ", "{task}: ")
_AXES = {"us": ("123456", "000042", "999001"), "line": (249, 217), "task": (0, 1, 7)}

TF_FMTS = [
    Fmt(
        "tf-start-abort-timeout",
        TF,
        "BaseCollectiveExecutor::StartAbort DEADLINE_EXCEEDED: {msg}\n",
        {**_AXES, "msg": _TIMEOUTS},
        HANG,
        prefixes=_CC_PREFIXES,
    ),
    Fmt(
        "tf-aborted-by-timeout",
        TF,
        "{exc}: Collective ops is aborted by: {msg}\n" + _RESET + "\n",
        {
            **_AXES,
            "msg": _TIMEOUTS,
            "exc": (
                "tensorflow.python.framework.errors_impl.DeadlineExceededError",
                "DeadlineExceededError",
            ),
        },
        HANG,
        prefixes=_PY_PREFIXES,
    ),
    Fmt(
        "tf-timeout-status",
        TF,
        "tensorflow.python.framework.errors_impl.DeadlineExceededError: {msg}\n"
        "\t [[{{{{node CollectiveReduceV2}}}}]] [Op:__inference_train_function_{fn}]\n",
        {**_AXES, "msg": _TIMEOUTS, "fn": (8812, 120441)},
        HANG,
        prefixes=_PY_PREFIXES,
    ),
]


@pytest.mark.parametrize(("f", "text", "node"), params(TF_FMTS))
def test_a_tensorflow_collective_report_reads_as_its_source_documents(
    f: Fmt, text: str, node: None
) -> None:
    check(f, text, node)


def test_a_collective_timeout_names_no_task_as_culprit() -> None:
    got = explain_text(
        "[worker-3] tensorflow.python.framework.errors_impl.DeadlineExceededError: Collective "
        f"ops is aborted by: {_TIMEOUTS[1]}\n{_RESET}\n"
    )
    assert (got.category, got.blame, got.node) == (*HANG, None), (TF, got.explanation)


def test_the_abort_wrapper_leaves_the_verdict_to_the_error_it_wraps() -> None:
    # StartAbort wraps the first error; an NCCL CUDA failure inside reads as that failure
    inner = "Error invoking NCCL: unhandled cuda error"
    got = explain_text(
        f"BaseCollectiveExecutor::StartAbort UNKNOWN: {inner}\n"
        f"tensorflow.python.framework.errors_impl.UnknownError: Collective ops is aborted by: "
        f"{inner}\n{_RESET}\n"
    )
    assert got.category != HANG[0], (TF, got.explanation)
    # a timeout beside the job's own error is not the cause
    got = explain_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        f"BaseCollectiveExecutor::StartAbort DEADLINE_EXCEEDED: {_TIMEOUTS[0]}\n"
    )
    assert (got.category, got.blame) == ("oom_gpu", "job"), (TF, got.explanation)
