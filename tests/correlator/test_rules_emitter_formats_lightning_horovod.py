"""PyTorch Lightning's and Horovod's failure reports from their own formats (probe set nine).

Formats: Lightning-AI/pytorch-lightning @7f0c3436cd (src/lightning/pytorch/trainer/connectors/
signal_connector.py: the SLURM auto-requeue and SIGTERM handlers; loops/fit_loop.py: "`Trainer.fit`
stopped"; trainer/configuration_validator.py and connectors/accelerator_connector.py:
MisconfigurationException); horovod/horovod @2626dc87a3 (common/stall_inspector.cc, controller.cc's
"Mismatched ..." checks, common.h SHUT_DOWN_ERROR, logging.cc's prefix, runner/gloo_run.py's
"Process name:" report, runner/mpi_run.py, runner/elastic/discovery.py "blacklist failing host").
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

PL = "Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/connectors/signal_connector.py"
PL_SIG = f"{PL}@7f0c3436cd"
PL_CFG = "Lightning-AI/pytorch-lightning trainer/configuration_validator.py@7f0c3436cd"
HVD = "horovod/horovod horovod/{}@2626dc87a3"
USER = ("user_code", "job")
OOM_HOST = ("oom_host", "unknown")
SCHED_JOB = ("scheduler", "job")
HANG = ("nccl_timeout_unknown", "unknown")
SYMPTOM = (None, "unknown")

# the logger's deliveries: Lightning's own handler (bare), logging.basicConfig, the pre-2.0
# package name, srun --label's task prefix
_PL_PREFIXES = (
    "",
    "INFO:lightning.pytorch.trainer.connectors.signal_connector:",
    "INFO:pytorch_lightning.trainer.connectors.signal_connector:",
    "0: ",
)
JOB_IDS = ("4711", "123456", "9001234_17", "88")

LIGHTNING_FMTS = [
    Fmt(
        "pl-requeue-signal",
        PL_SIG,
        "Handling auto-requeue signal: {sig}\n",
        {"sig": (10, 12, 10, 15)},
        SCHED_JOB,
        prefixes=_PL_PREFIXES,
    ),
    Fmt(
        "pl-requeing",
        PL_SIG,
        "requeing job {job}...\n",
        {"job": JOB_IDS},
        SCHED_JOB,
        prefixes=_PL_PREFIXES,
    ),
    Fmt(
        "pl-requeued",
        PL_SIG,
        "Requeued SLURM job: {job}\n",
        {"job": JOB_IDS},
        SCHED_JOB,
        prefixes=_PL_PREFIXES,
    ),
    Fmt(
        "pl-requeue-failed",
        PL_SIG,
        "Requeuing SLURM job {job} failed with error code {rc}\n",
        {"job": JOB_IDS, "rc": (1, 127, 1, 2)},
        SCHED_JOB,
        prefixes=tuple(p.replace("INFO", "WARNING") for p in _PL_PREFIXES),
    ),
    Fmt(
        "pl-misconfig",
        PL_CFG,
        "{mod}.MisconfigurationException: {msg}\n",
        {
            "mod": (
                "lightning.fabric.utilities.exceptions",
                "lightning_fabric.utilities.exceptions",
                "pytorch_lightning.utilities.exceptions",
            ),
            "msg": (
                "No `training_step()` method defined. Lightning `Trainer` expects as minimum a"
                " `training_step()`, `train_dataloader()` and `configure_optimizers()` to be "
                "defined.",
                "`Trainer.predict` requires `forward` method to run.",
                "Automatic gradient clipping is not supported for manual optimization. Remove "
                "`Trainer(gradient_clip_val=1.0)` or switch to automatic optimization.",
                "precision set through both strategy class and plugins, choose one",
            ),
        },
        USER,
        prefixes=("", "[rank1]: ", "0: "),
    ),
]


@pytest.mark.parametrize(("f", "text", "node"), params(LIGHTNING_FMTS))
def test_a_lightning_report_reads_as_its_source_documents(f: Fmt, text: str, node: None) -> None:
    check(f, text, node)


@pytest.mark.parametrize(
    "line",
    [
        f"{p}{body}"
        for p in ("", "[rank: 0] ", "[rank: 3] ")
        for body in ("Received SIGTERM: 15", "Bypassing SIGTERM: 15")
    ],
)
def test_a_lightning_sigterm_is_a_consequence_not_a_cause(line: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame, got.node) == (*SYMPTOM, None), (PL_SIG, got)
    # beside the rank's own CUDA out-of-memory error, the error decides
    got = explain_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n" + line + "\n"
    )
    assert (got.category, got.blame) == ("oom_gpu", "job"), (PL_SIG, got)


@pytest.mark.parametrize(
    "line",
    [
        "SLURM auto-requeueing enabled. Setting signal handlers.",
        "`Trainer.fit` stopped: `max_epochs=10` reached.",
        "`Trainer.fit` stopped: `max_steps=250000` reached.",
        "`Trainer.fit` stopped: No training batches.",
        "INFO:lightning.pytorch.utilities.rank_zero:`Trainer.fit` stopped: `max_epochs=3` reached.",
        "GPU available: True (cuda), used: True",
        "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1,2,3]",
        "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/8",
    ],
)
def test_healthy_lightning_lines_read_as_nothing(line: str) -> None:
    assert explain_text(line + "\n").explanation.startswith("No failure evidence"), line


# --- Horovod ----------------------------------------------------------------------------------

# logging.cc: "[%Y-%m-%d %H:%M:%S.%06d: %c %s:%d] " (%s is __FILE__) or "[%c %s:%d] " without
# the time; horovodrun's gloo "[rank]<stderr>:" and mpirun --tag-output "[1,rank]<stderr>:"
_HVD_PREFIXES = (
    "[2024-03-05 10:11:12.{us}: {lvl} /tmp/pip-install-x/horovod/common/{file}:{line}] ",
    "[{lvl} horovod/common/{file}:{line}] ",
    "[{rank}]<stderr>:[{lvl} horovod/common/{file}:{line}] ",
    "[1,{rank}]<stderr>:[2024-03-05 10:11:12.{us}: {lvl} horovod/common/{file}:{line}] ",
)
_STALL = (
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
    "ranks and are waiting for remainder of ranks for more than {warn} seconds. This may "
    "indicate that different ranks are trying to submit different tensors or that only subset "
    "of ranks is submitting tensors, which will cause deadlock. \n"
    "{title}:\n{missing}{mark}: [{tensor}]\n"
)
_TENSORS = (
    "DistributedAdam_Allreduce/cond_1/HorovodAllreduce_grads_1_0",
    "allreduce.module.fc.weight, allreduce.module.fc.bias",
    "broadcast.state_dict.epoch",
    "HorovodAllgather_gather_0",
)
_STALL_VALUES = {
    "us": ("123456", "000007", "999999"),
    "file": ("stall_inspector.cc",),
    "line": (107, 98),
    "rank": (0, 3, 12),
    "warn": (60, 120, 30),
    "missing": (1, 7, 0, 255),
    "tensor": _TENSORS,
}
MISMATCHED = (
    "Mismatched data types: One rank had type float32, but another rank had type float16.",
    "Mismatched operations: One rank did an ALLREDUCE, but another rank did an ALLGATHER.",
    "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [1000, 512], but "
    "another rank sent a tensor of shape [1000, 256].",
    "Mismatched ALLGATHER tensor shapes: One rank sent a tensor of rank 2, but another rank "
    "sent a tensor of rank 3.",
    "Mismatched ALLGATHER tensor shapes: One rank sent a tensor with dimension 1 equal to 64, "
    "but another rank sent a tensor with dimension 1 equal to 32.",
    "Mismatched BROADCAST root ranks: One rank specified root rank 0, but another rank "
    "specified root rank 1.",
    "Mismatched ALLREDUCE CPU/GPU device selection: One rank specified device GPU, but "
    "another rank specified device CPU.",
    "Mismatched reduction operation: One rank sent reduction op 1, but another rank sent "
    "reduction op 0.",
    "Mismatched prescale and/or postscale factors: One rank sent factors (1, 0.125), but "
    "another rank sent factors (1, 0.0625).",
)
_GLOO = (
    "RuntimeError: Horovod detected that one or more processes exited with non-zero status, "
    "thus causing the job to be terminated. The first process to do so was:\n"
    "Process name: {host}[{slot}]\nExit code: {code}\n"
)

HOROVOD_FMTS = [
    Fmt(
        "hvd-stall-warning",
        HVD.format("common/stall_inspector.cc"),
        _STALL,
        {
            **_STALL_VALUES,
            "lvl": ("W",),
            "title": ("Missing ranks", "Stalled ranks"),
            "mark": ("",),
        },
        HANG,
        prefixes=_HVD_PREFIXES,
    ),
    Fmt(
        "hvd-stall-shutdown",
        HVD.format("common/stall_inspector.cc"),
        _STALL + 'One or more rank (marked by "!") is stalled for longer than {kill} seconds. '
        "Will shutdown.\n",
        {
            **_STALL_VALUES,
            "lvl": ("E",),
            "title": ("Missing ranks",),
            "mark": ("!",),
            "kill": (300, 600, 61),
        },
        HANG,
        prefixes=_HVD_PREFIXES,
    ),
    Fmt(
        "hvd-mismatched",
        HVD.format("common/controller.cc"),
        "{exc}: {msg}\n",
        {
            "exc": (
                "horovod.common.exceptions.HorovodInternalError",
                "RuntimeError",
                "tensorflow.python.framework.errors_impl.FailedPreconditionError",
                "HorovodInternalError",
            ),
            "msg": MISMATCHED,
        },
        USER,
        prefixes=("", "[1]<stderr>:", "[1,0]<stderr>:"),
    ),
    *[
        Fmt(
            f"hvd-gloo-exit-{code}",
            HVD.format("runner/gloo_run.py"),
            _GLOO,
            {"host": HOSTS, "slot": (0, 3, 7), "code": (code,)},
            want,
            "host",
        )
        for code, want in ((1, USER), (2, USER), (137, OOM_HOST), (139, USER), (134, USER))
    ],
    *[
        Fmt(
            f"hvd-mpirun-{code}",
            HVD.format("runner/mpi_run.py"),
            "RuntimeError: mpirun failed with exit code {code}\n",
            {"code": (code,)},
            want,
        )
        for code, want in ((1, USER), (2, USER), (137, OOM_HOST), (139, USER))
    ],
]


@pytest.mark.parametrize(("f", "text", "node"), params(HOROVOD_FMTS))
def test_a_horovod_report_reads_as_its_source_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


def test_horovod_stall_names_ranks_never_a_host() -> None:
    text = _STALL.format(warn=60, title="Missing ranks", missing=3, mark="", tensor=_TENSORS[0])
    assert explain_text("[W horovod/common/stall_inspector.cc:107] " + text).node is None


_SHUT = (
    "Horovod has been shut down. This was caused by an exception on one of the ranks or an "
    "attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished "
    "execution. If the shutdown was caused by an exception, you should see the exception in the "
    "log before the first shutdown message."
)


@pytest.mark.parametrize(
    "line",
    [
        f"horovod.common.exceptions.HorovodInternalError: {_SHUT}",
        f"tensorflow.python.framework.errors_impl.UnknownError: {_SHUT}",
        f"[1]<stderr>:RuntimeError: {_SHUT}",
        "RuntimeError: Horovod was shutdown because number of resets during elastic job "
        "exceeded limit: 3",
    ],
)
def test_horovod_shut_down_is_a_symptom_the_earlier_error_decides(line: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame, got.node) == (*SYMPTOM, None), (HVD, got)
    assert not got.explanation.startswith("No failure evidence"), line
    cause = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    got = explain_text(cause + line + "\n")
    assert (got.category, got.blame) == USER, (HVD, got)


@pytest.mark.parametrize("host", HOSTS[:4])
def test_horovod_blacklisted_host_is_named_but_not_blamed(host: str) -> None:
    got = explain_text(f"INFO:root:blacklist failing host: {host}\n")
    assert (got.category, got.blame, got.node) == (*SYMPTOM, host), got
    # the failed worker's own report decides the verdict, on its host
    got = explain_text(
        f"INFO:root:blacklist failing host: {host}\n" + _GLOO.format(host=host, slot=1, code=137)
    )
    assert (got.category, got.blame, got.node) == (*OOM_HOST, host), got


@pytest.mark.parametrize(
    "line",
    [
        "[0]<stdout>:[I horovod/common/operations.cc:656] Horovod initialized.",
        "INFO:root:start worker process: gpu-a-07[0]",
        "INFO:root:record state: gpu-a-07[1] = SUCCESS",
        "INFO:root:all 8 workers recorded",
        "INFO:root:success count == 8 -> stop running",
        "[1,0]<stdout>:Epoch 1/10 - loss: 0.4312 - accuracy: 0.8811",
        "INFO:root:wait for available slots: 4",
    ],
)
def test_healthy_horovod_lines_read_as_nothing(line: str) -> None:
    assert explain_text(line + "\n").explanation.startswith("No failure evidence"), line
