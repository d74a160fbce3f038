"""Megatron-LM's training-health checks and DeepSpeed's runtime reports (probe set ten).

Formats: NVIDIA/Megatron-LM @d98e8a64dd (megatron/core/rerun_state_machine.py: validate_result's
"Unexpected result ..." lines, log_failure's "Rank R, node H, device D, iteration #N: ..." prefix,
the first and second rerun's fault attribution (RerunDiagnostic: TRANSIENT_ERROR "could not be
reproduced on the same GPU", PERSISTENT_ERROR "reproduced on the same GPU, but not on a different
GPU") and should_checkpoint_and_exit's exit lines; megatron/core/distributed/
param_and_grad_buffer.py and pretrain_gpt.py: the NaN/Inf messages; megatron/core/utils.py:
StragglerDetector.report; megatron/training/training.py: logging.basicConfig, whose default
format is "%(levelname)s:%(name)s:%(message)s"); the asserts those checks replaced, at cf84356171^
(param_and_grad_buffer.py, pretrain_gpt.py: "Rank R: found NaN in local ... Device: D, node: H").
deepspeedai/DeepSpeed @edaa722126 (deepspeed/runtime/fp16/loss_scaler.py update_scale,
fused_optimizer.py and unfused_optimizer.py overflow messages, utils/logging.py's formatter
"[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] " and log_dist's
"[Rank N] ", runtime/zero/partition_parameters.py, stage3.py and partitioned_param_coordinator.py).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

MLM = "NVIDIA/Megatron-LM {}@d98e8a64dd"
RSM = MLM.format("megatron/core/rerun_state_machine.py")
MLM_OLD = "NVIDIA/Megatron-LM {}@cf84356171^"
DS = "deepspeedai/DeepSpeed deepspeed/runtime/{}@edaa722126"
GPU_HW = ("gpu_hardware", "node")
USER = ("user_code", "job")
SYMPTOM = (None, "unknown")

# logging.basicConfig's default format (training.py), bare (the module logger's own stream
# handler), torchrun's per-rank "[rankN]:" and srun --label's "N: "
_MLM_PREFIXES = (
    "ERROR:megatron.core.rerun_state_machine:",
    "",
    "[rank{rank}]:",
    "{rank}: ",
)
_WARN_PREFIXES = tuple(p.replace("ERROR", "WARNING") for p in _MLM_PREFIXES)
# log_failure's own prefix: the rank, os.uname()[1] and the current CUDA device
_AT = "Rank {rank}, node {host}, device {dev}, iteration #{it}: "
# what f"{tensor}" prints for a 0-dim CUDA loss or grad norm
RESULTS = (
    "tensor(nan, device='cuda:0')",
    "tensor(inf, device='cuda:3', grad_fn=<SumBackward0>)",
    "tensor(nan, device='cuda:7', grad_fn=<DivBackward0>)",
)
FINE = ("tensor(2.3417, device='cuda:0')", "tensor(1.0625, device='cuda:3')")
NAN_MESSAGES = (
    "found NaN in local forward loss calculation",
    "found Inf in local grad norm for bucket #0 in backward pass before data-parallel "
    "communication collective",
    "found NaN in local grad norm for bucket #3 in backward pass before data-parallel "
    "communication collective",
    "found Inf in local forward loss calculation",
)
_AXES = {"rank": (3, 0, 17, 255), "dev": (3, 0, 1, 7), "it": (1201, 2, 88000, 514)}

MEGATRON_FMTS = [
    Fmt(
        "mlm-first-rerun-not-reproducible",
        RSM,
        _AT + "First rerun: unexpected result is not reproducible within the tolerance "
        "({fine} != {res})!\n",
        {**_AXES, "host": HOSTS, "res": RESULTS, "fine": FINE},
        GPU_HW,
        "host",
        _MLM_PREFIXES,
    ),
    Fmt(
        "mlm-transient",
        RSM,
        _AT + "Possible transient error!!\n",
        {**_AXES, "host": HOSTS},
        GPU_HW,
        "host",
        _MLM_PREFIXES,
    ),
    Fmt(
        "mlm-persistent",
        RSM,
        _AT + "Possible persistent error!!\n",
        {**_AXES, "host": HOSTS},
        GPU_HW,
        prefixes=_MLM_PREFIXES,
    ),
    Fmt(
        "mlm-second-rerun-not-reproducible",
        RSM,
        "Second rerun: unexpected result is not reproducible on a different GPU, therefore was "
        "likely incorrect ({fine} != {res})\n",
        {"rank": (0, 5), "res": RESULTS, "fine": FINE},
        GPU_HW,
        prefixes=_WARN_PREFIXES,
    ),
    Fmt(
        "mlm-correct-result",
        RSM,
        _AT + "Correct result (but possible Application error) ({msg})!\n",
        {**_AXES, "host": HOSTS, "msg": NAN_MESSAGES},
        USER,
        prefixes=_MLM_PREFIXES,
    ),
    Fmt(
        "mlm-second-rerun-reproducible",
        RSM,
        "Second rerun: unexpected result is reproducible on a different GPU, therefore it was "
        "likely correct ({res} = {res})\n",
        {"rank": (0, 5), "res": RESULTS},
        USER,
        prefixes=_WARN_PREFIXES,
    ),
    Fmt(
        "mlm-unexpected-result",
        RSM,
        "Unexpected result {res} on rank {rank} at iteration #{it} invocation #{seq} "
        "(message='{msg}')\n",
        {**_AXES, "res": RESULTS, "seq": (1, 2, 4), "msg": NAN_MESSAGES},
        USER,
        prefixes=_MLM_PREFIXES,
    ),
    Fmt(
        "mlm-unexpected-result-rerun-disabled",
        RSM,
        "RuntimeError: Rank {rank}, node {host}, device {dev}, iteration {it}: Unexpected result "
        "{res} (message='{msg}')\n",
        {**_AXES, "host": HOSTS, "res": RESULTS, "msg": NAN_MESSAGES},
        USER,
        prefixes=("", "[rank{rank}]: ", "{rank}: "),
    ),
    Fmt(
        "mlm-old-assert-grad-norm",
        MLM_OLD.format("megatron/core/distributed/param_and_grad_buffer.py"),
        "AssertionError: Rank {rank}: found NaN in local grad norm in backward pass before "
        "data-parallel communication collective. Device: {dev}, node: {host}\n",
        {**_AXES, "host": HOSTS},
        USER,
        prefixes=("", "[rank{rank}]: ", "{rank}: "),
    ),
    Fmt(
        "mlm-old-assert-loss",
        MLM_OLD.format("pretrain_gpt.py"),
        "AssertionError: Rank {rank}: found NaN in local forward loss calculation. "
        "Device: {dev}, node: {host}\n",
        {**_AXES, "host": HOSTS},
        USER,
        prefixes=("", "[rank{rank}]: ", "{rank}: "),
    ),
]


@pytest.mark.parametrize(("f", "text", "node"), params(MEGATRON_FMTS))
def test_a_megatron_health_check_reads_as_its_source_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize("host", HOSTS[:4])
def test_a_persistent_error_never_blames_the_gpu_that_rerun_cleanly(host: str) -> None:
    # the second rerun runs on a *different* GPU, and log_failure prints where it runs: the
    # node in "Possible persistent error" is the healthy one, not the faulty GPU's
    got = explain_text(
        f"Rank 4, node {host}, device 2, iteration #77: Possible persistent error!!\n"
    )
    assert (got.category, got.blame, got.node) == (*GPU_HW, None), (RSM, got)


_TRANSIENT_RUN = (
    "Unexpected result tensor(nan, device='cuda:{dev}') on rank {rank} at iteration #{it} "
    "invocation #1 (message='found NaN in local forward loss calculation')\n"
    "Need to rerun step to check reproducibility of initial result\n"
    "Rank {rank}, node {host}, device {dev}, iteration #{it}: First rerun: unexpected result is "
    "not reproducible within the tolerance (tensor(2.1, device='cuda:{dev}') != "
    "tensor(nan, device='cuda:{dev}'))!\n"
    "Rank {rank}, node {host}, device {dev}, iteration #{it}: Possible transient error!!\n"
    "Exiting now. The job can be resumed from a previous checkpoint\n"
)
_FIRST_RUN = (
    "Unexpected result tensor(nan, device='cuda:1') on rank 9 at iteration #500 invocation #1 "
    "(message='found NaN in local forward loss calculation')\n"
    "Need to rerun step to check reproducibility of initial result\n"
    "Rank 9, node {a}, device 1, iteration #500: First rerun: unexpected result is reproducible "
    "within the tolerance (tensor(nan, device='cuda:1') = tensor(nan, device='cuda:1')). Need to "
    "rerun on a different GPU to verify correctness.!\n"
    "Saving a checkpoint and exiting now. Please resume the job from the checkpoint to rerun the "
    "last iteration and establish a diagnostic\n"
)


@pytest.mark.parametrize(("rank", "dev", "host"), [(3, 3, HOSTS[0]), (17, 1, HOSTS[2])])
def test_a_transient_fault_outranks_the_nan_that_triggered_the_rerun(
    rank: int, dev: int, host: str
) -> None:
    got = explain_text(_TRANSIENT_RUN.format(rank=rank, dev=dev, host=host, it=1201))
    assert (got.category, got.blame, got.node) == (*GPU_HW, host), (RSM, got.explanation)


@pytest.mark.parametrize(("a", "b"), [(HOSTS[1], HOSTS[3]), (HOSTS[4], HOSTS[5])])
def test_a_persistent_fault_across_two_runs_never_names_the_clean_gpu(a: str, b: str) -> None:
    text = _FIRST_RUN.format(a=a) + (
        "Second rerun: unexpected result is not reproducible on a different GPU, therefore was "
        "likely incorrect (tensor(2.2, device='cuda:0') != tensor(nan, device='cuda:1'))\n"
        f"Rank 9, node {b}, device 0, iteration #500: Possible persistent error!!\n"
        "Exiting now. A checkpoint at the last iteration already exists if further examination "
        "is needed\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == GPU_HW, (RSM, got.explanation)
    assert got.node != b, (RSM, got.explanation)


def test_a_nan_reproduced_on_another_gpu_is_the_jobs() -> None:
    text = _FIRST_RUN.format(a=HOSTS[1]) + (
        "Second rerun: unexpected result is reproducible on a different GPU, therefore it was "
        "likely correct (tensor(nan, device='cuda:0') = tensor(nan, device='cuda:1'))\n"
        f"Rank 9, node {HOSTS[3]}, device 0, iteration #500: Correct result (but possible "
        "Application error) (found NaN in local forward loss calculation)!\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == USER, (RSM, got.explanation)


def test_a_nan_awaiting_its_rerun_reads_as_the_jobs() -> None:
    # the first run only checkpoints and exits; until a rerun elsewhere attributes the fault,
    # the cautious reading of a NaN loss is the job's
    got = explain_text(_FIRST_RUN.format(a=HOSTS[6]))
    assert (got.category, got.blame) == USER, (RSM, got.explanation)


@pytest.mark.parametrize(
    "line",
    [
        "Need to rerun step to check reproducibility of initial result",
        "Exiting now. The job can be resumed from a previous checkpoint",
        "Saving a checkpoint and exiting now. Please resume the job from the checkpoint to rerun "
        "the last iteration and establish a diagnostic",
        "Exiting now. A checkpoint at the last iteration already exists if further examination "
        "is needed",
        "Exiting now. Please resume the job from the same checkpoint to rerun the last iteration "
        "and establish a diagnostic",
        "Need to restart job from the same checkpoint because it was scheduled on the same "
        "node/GPU",
        "Got rescheduled on the same GPU. Need to resume again from the same checkpoint "
        "(node: gpu-a-07, gpu: 3)",
        "Continuing normal execution because failed validation was not fatal",
    ],
)
def test_a_rerun_exit_path_is_a_consequence_not_a_cause(line: str) -> None:
    for prefix in ("", "WARNING:megatron.core.rerun_state_machine:", "0: "):
        got = explain_text(prefix + line + "\n")
        assert (got.category, got.blame, got.node) == (*SYMPTOM, None), (RSM, line, got)


@pytest.mark.parametrize(
    "line",
    [
        "WARNING:megatron.core.rerun_state_machine:RerunStateMachine initialized in mode "
        "RerunMode.VALIDATE_RESULTS",
        "WARNING:megatron.core.rerun_state_machine:Result validation enabled",
        # non-fatal checks: the job goes on (fatal=False in pretrain_gpt.py, param_and_grad_buffer)
        "Rank 0, node gpu-a-07, device 0, iteration #300: Unexpected result "
        "tensor(98.1, device='cuda:0') (message='Spiky loss')",
        "Unexpected result tensor(4512.0, device='cuda:2') on rank 2 at iteration #41 invocation "
        "#3 (message='found unexpected large grads in bucket #1 in backward pass before "
        "data-parallel communication collective')",
        # StragglerDetector.report (megatron/core/utils.py): min/max per rank, never a failure
        "[2025-03-04 10:11:12] | MnRtt/Rnk: 3012.45ms/7 | MxRtt/Rnk: 3105.77ms/0 | MnPwr/Rnk: "
        "512000.00W/3 | MxPwr/Rnk: 698000.00W/12 | MnTmp/Rnk: 41.00C/5 | MxTmp/Rnk: 79.00C/9 | "
        "MnUtl/Rnk: 97.00%/1 | MxUtl/Rnk: 100.00%/0 | MnClk/Rnk: 1755.00MHz/4 | MxClk/Rnk: "
        "1980.00MHz/2 | MnDRtt/Rnk: 12.31ms/6 | MxDRtt/Rnk: 88.10ms/11 | MnEtpt/Rnk: "
        "401.22TF/7 | MxEtpt/Rnk: 415.90TF/0",
        "^^^^ Bottom 4 Ranks with lowest  Etpt(TF): 401.22/7, 402.10/3, 403.00/12, 404.51/6,",
        " iteration      500/  100000 | consumed samples:        64000 | lm loss: 2.341E+00 | "
        "loss scale: 1.0 | grad norm: 0.412 | number of skipped iterations:   0 | number of nan "
        "iterations:   0 |",
    ],
)
def test_healthy_megatron_lines_read_as_nothing(line: str) -> None:
    assert explain_text(line + "\n").explanation.startswith("No failure evidence"), line


# --- DeepSpeed runtime ------------------------------------------------------------------------

# utils/logging.py's formatter; log_dist's "[Rank N] "; torchrun's "[rankN]:"; srun's "N: "
_DS_LOG = "[2024-05-06 07:08:09,{ms}] [{lvl}] [{file}:{line}:{func}] "
_DS_EXC_PREFIXES = ("", "[rank{rank}]: ", "{rank}: ", "[rank{rank}]:")

DEEPSPEED_FMTS = [
    Fmt(
        "ds-min-loss-scale",
        DS.format("fp16/loss_scaler.py"),
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. "
        "Exiting run.\n",
        {"rank": (0, 3, 15, 64)},
        USER,
        prefixes=_DS_EXC_PREFIXES,
    ),
    Fmt(
        "ds-zero3-param-availability",
        DS.format("zero/partition_parameters.py"),
        "RuntimeError: expected param {{'id': {pid}, 'status': '{st}', 'numel': 0, 'ds_numel': "
        "{n}, 'shape': (0,), 'ds_shape': ({n},), 'requires_grad': True, 'grad_shape': None, "
        "'persist': False, 'active_sub_modules': {{{pid}}}, 'ds_tensor.shape': torch.Size([{s}])}}"
        " to {be} available\n",
        {
            "rank": (0, 3, 15),
            "pid": (12, 0, 411),
            "st": ("NOT_AVAILABLE", "INFLIGHT", "AVAILABLE"),
            "n": (4096, 16777216, 768),
            "s": (512, 2097152, 96),
            "be": ("be", "not be"),
        },
        USER,
        prefixes=_DS_EXC_PREFIXES,
    ),
    Fmt(
        "ds-zero3-reduce-scatter-size",
        DS.format("zero/stage3.py"),
        "RuntimeError: {a} != {b} Cannot reduce scatter gradients whose size is not same as the "
        "params\n",
        {"rank": (0, 7, 31), "a": (4096, 0, 65536), "b": (8192, 4096, 32768)},
        USER,
        prefixes=_DS_EXC_PREFIXES,
    ),
]


@pytest.mark.parametrize(("f", "text", "node"), params(DEEPSPEED_FMTS))
def test_a_deepspeed_runtime_report_reads_as_its_source_documents(
    f: Fmt, text: str, node: None
) -> None:
    check(f, text, node)


_OVERFLOWS = (
    _DS_LOG.format(ms="123", lvl="INFO", file="loss_scaler.py", line=183, func="update_scale")
    + "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    _DS_LOG.format(ms="9", lvl="INFO", file="loss_scaler.py", line=190, func="update_scale")
    + "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4096, but hysteresis is "
    "2. Reducing hysteresis to 1",
    "[deepspeed] OVERFLOW! Rank 0 Skipping step.",
    _DS_LOG.format(ms="555", lvl="INFO", file="fused_optimizer.py", line=171, func="step")
    + "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: "
    "1024.0, reducing to 512.0",
    _DS_LOG.format(ms="071", lvl="INFO", file="logging.py", line=128, func="log_dist")
    + "[Rank 0] Overflow detected. Skipping step. Attempted loss scale: 262144, reducing to "
    "131072",
    "fp16 dynamic loss scale overflow!",
    "0: [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8192, reducing to 4096",
    "Invalidate trace cache @ step 12: expected module 40, but got module 41",
    "Invalidate trace cache @ step 0 and module 3: cache has only 2 modules",
)


@pytest.mark.parametrize("line", _OVERFLOWS)
def test_a_deepspeed_skipped_step_reads_as_nothing(line: str) -> None:
    # dynamic loss scaling skips the step and lowers the scale: its normal working
    assert explain_text(line + "\n").explanation.startswith("No failure evidence"), line


@pytest.mark.parametrize("line", _OVERFLOWS[:3])
def test_skipped_steps_beside_a_real_failure_leave_the_verdict_to_it(line: str) -> None:
    got = explain_text(
        line + "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    assert (got.category, got.blame) == ("oom_gpu", "job"), (DS, got.explanation)
    got = explain_text(
        "\n".join([line] * 5) + "\nException: Current loss scale already at minimum - cannot "
        "decrease scale anymore. Exiting run.\n"
    )
    assert (got.category, got.blame) == USER, (DS, got.explanation)
