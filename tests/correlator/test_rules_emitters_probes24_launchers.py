"""Probe set twenty-four (launchers): training frameworks' own launchers and their wrappers.

Read from the emitters' sources:
- MosaicML Composer, mosaicml/composer composer/cli/launcher.py @6405188805a0 (the `composer`
  CLI: _monitor_processes' log.error "Rank {r} crashed with exit code {c}.",
  _print_process_exit_status' "Global rank {r} (PID {p}) exited with code {c}" and its
  "----------Begin global rank {r} STDOUT----------" block, _cleanup_processes' SIGTERM/SIGKILL
  lines, _aggregate_process_returncode's "has still not exited; return exit code 1."; a
  Popen returncode, so -N is signal N) and composer/trainer/trainer.py, same commit (the
  auto-microbatching RuntimeWarning and RuntimeErrors, OOM_FOUND_ON_OTHER_RANK);
- Hugging Face Accelerate, huggingface/accelerate src/accelerate/commands/launch.py and
  src/accelerate/launchers.py @16cb6eb80dd9 (CalledProcessError from `accelerate launch`;
  notebook_launcher's RuntimeErrors);
- Colossal-AI, hpcaitech/ColossalAI colossalai/cli/launcher/multinode_runner.py and run.py
  @4f9953be335e (`colossalai run`: "Error: failed to run {cmds} on {hostname}, is localhost:
  {..}, exception: {e}", then "====== Training on All Nodes =====" and "{hostname}: {msg}");
  fabric's UnexpectedExit (pyinvoke/invoke invoke/exceptions.py) is the usual `e`.
Labels follow the corpus policy: a launcher's exit report goes to the signal reasoner (SIGKILL
alone oom_host/unknown, non-signal codes and crash signals user_code/job); a wrapper never
outranks a cause read elsewhere; a user's bug never names a node. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

COMPOSER = "mosaicml/composer composer/cli/launcher.py@6405188805"
TRAINER = "mosaicml/composer composer/trainer/trainer.py@6405188805"
ACCEL = "huggingface/accelerate src/accelerate/launchers.py@16cb6eb80d"
ACCEL_CLI = "huggingface/accelerate src/accelerate/commands/launch.py@16cb6eb80d"
COLOSSAL = "hpcaitech/ColossalAI colossalai/cli/launcher/multinode_runner.py@4f9953be33"

SIGKILL = ("oom_host", "unknown")
JOB = ("user_code", "job")
NONE = (None, "unknown")
OOM_GPU = ("oom_gpu", "job")
# logging.basicConfig's default format, as the composer CLI configures it
_LOG = "{level}:composer.cli.launcher:"
_CMDS = (
    "['/usr/bin/python', '-m', 'torch.distributed.run', '--nproc_per_node', '8', 'train.py']",
    "['/opt/conda/bin/python3', 'finetune.py', '--config', 'cfg.yaml']",
)

FORMATS = (
    Fmt(
        "composer-crashed-kill",
        COMPOSER,
        _LOG.format(level="ERROR") + "Rank {r} crashed with exit code {c}.\n",
        {"r": (0, 3, 15), "c": (-9,)},
        SIGKILL,
    ),
    Fmt(
        "composer-crashed-code",
        COMPOSER,
        _LOG.format(level="ERROR") + "Rank {r} crashed with exit code {c}.\n",
        {"r": (1, 7), "c": (1, 2, -11, -6)},
        JOB,
    ),
    Fmt(
        "composer-exit-status",
        COMPOSER,
        "Global rank {r} (PID {p}) exited with code {c}\n"
        "----------Begin global rank {r} STDOUT----------\nstep 10 loss 2.31\n"
        "----------End global rank {r} STDOUT----------\n",
        {"r": (1, 6), "p": (88231, 412), "c": (1, -11, 2)},
        JOB,
    ),
    Fmt(
        "composer-aggregate-kill",
        COMPOSER,
        _LOG.format(level="ERROR") + "Global rank {r} (PID {p}) exited with code {c}\n",
        {"r": (2, 9), "p": (4411, 77), "c": (-9,)},
        SIGKILL,
    ),
    # the launcher's own exit status after a rank outlived SIGKILL: no reading of its own
    Fmt(
        "composer-not-exited",
        COMPOSER,
        _LOG.format(level="ERROR")
        + "Global rank {r} (PID {p}) has still not exited; return exit code 1.\n",
        {"r": (0, 5), "p": (4411, 90211)},
        NONE,
    ),
    Fmt(
        "composer-cleanup",
        COMPOSER,
        "{line}\n",
        {
            "line": (
                "INFO:composer.cli.launcher:Killing global rank 1 (PID 991) with SIGTERM",
                "WARNING:composer.cli.launcher:Failed to kill global rank 1 (PID 991) with "
                "SIGTERM; terminating with SIGKILL instead",
                "Waiting up to 30 seconds for all training processes to terminate. Press Ctrl-C "
                "to exit immediately.",
            )
        },
        NONE,
    ),
    Fmt(
        "composer-oom-microbatch-1",
        TRAINER,
        "RuntimeError: {msg}\n",
        {
            "msg": (
                "CUDA out of memory or excessive memory allocation retries detected. The train "
                "loop failed with an internal microbatch of size 1.The GPU does not have enough "
                "memory to process even 1 sample during train.",
                "CUDA out of memory. The eval loop failed with an internal microbatch of size "
                "1.The GPU does not have enough memory to process even 1 sample during eval.",
                "CUDA out of memory encountered on a different rank",
            )
        },
        OOM_GPU,
    ),
    # auto microbatching caught the OOM and goes on with a smaller microbatch: nothing failed
    Fmt(
        "composer-automicrobatch-retry",
        TRAINER,
        "{line}\n",
        {
            "line": (
                "/usr/lib/python3/site-packages/composer/trainer/trainer.py:366: RuntimeWarning: "
                "CUDA out of memory or excessive memory allocation retries detected. Train "
                "microbatch size will be decreased from 8 -> 4.",
                "/x/composer/trainer/trainer.py:393: RuntimeWarning: CUDA out of memory detected. "
                "Train microbatch size will be decreased from 16 -> 8.",
                "INFO:composer.trainer.trainer:Automicrobatching changed the microbatch size "
                "from 8 -> 4.",
            )
        },
        NONE,
    ),
    Fmt(
        "accelerate-nonzero",
        ACCEL_CLI,
        "subprocess.CalledProcessError: Command '{cmd}' returned non-zero exit status {c}.\n",
        {"cmd": _CMDS, "c": (1, 2, -11)},
        JOB,
    ),
    Fmt(
        "accelerate-died-kill",
        ACCEL_CLI,
        "subprocess.CalledProcessError: Command '{cmd}' died with <Signals.SIGKILL: 9>.\n",
        {"cmd": _CMDS},
        SIGKILL,
    ),
    Fmt(
        "accelerate-died-crash",
        ACCEL_CLI,
        "subprocess.CalledProcessError: Command '{cmd}' died with <Signals.{sig}>.\n",
        {"cmd": _CMDS, "sig": ("SIGSEGV: 11", "SIGABRT: 6", "SIGFPE: 8")},
        JOB,
    ),
    # SIGBUS alone: the signal reasoner's /dev/shm reading (signals.py)
    Fmt(
        "accelerate-died-bus",
        ACCEL_CLI,
        "subprocess.CalledProcessError: Command '{cmd}' died with <Signals.SIGBUS: 7>.\n",
        {"cmd": _CMDS},
        ("oom_host", "unknown"),
    ),
    # notebook_launcher: the notebook initialised the device before forking (the user's import)
    Fmt(
        "accelerate-notebook-user",
        ACCEL,
        "RuntimeError: {msg}\n",
        {
            "msg": (
                "CUDA has been initialized before the `notebook_launcher` could create a forked "
                "subprocess. This likely stems from an outside import causing issues once the "
                "`notebook_launcher()` is called.",
                "Could not start distributed process. Libraries known to initialize device upon "
                "import have been imported already. Please keep these imports inside your "
                "training function to try and help with this:\n\t* `bitsandbytes`",
                "An issue was found when verifying a stable environment for the notebook "
                "launcher.This likely stems from an outside import causing issues once the "
                "`notebook_launcher()` is called.",
            )
        },
        JOB,
    ),
    Fmt(
        "colossalai-remote-exit",
        COLOSSAL,
        "Error: failed to run {cmd} on {host}, is localhost: False, exception: Encountered a bad "
        "command exit code!\n\nCommand: '{cmd}'\n\nExit code: {c}\n\nStdout: already printed\n\n"
        "Stderr: already printed\n\n\n\n====== Training on All Nodes =====\n{host}: failure\n",
        {
            "cmd": ("cd /home/u/proj && torchrun --nproc_per_node=8 train.py", "python -m t"),
            "host": ("gpu-b-03", "node0412", "10.4.0.17"),
            "c": (1, 2, 139),
        },
        JOB,
    ),
    # fabric runs the command through a shell: 137 is the shell's report of SIGKILL
    Fmt(
        "colossalai-remote-kill",
        COLOSSAL,
        "Error: failed to run torchrun train.py on {host}, is localhost: False, exception: "
        "Encountered a bad command exit code!\n\nCommand: 'torchrun train.py'\n\nExit code: 137"
        "\n\n",
        {"host": ("gpu-b-03", "dgx-h100-031")},
        SIGKILL,
    ),
    Fmt(
        "colossalai-summary",
        COLOSSAL,
        "\n====== Training on All Nodes ====={rows}\n\n====== Stopping All Nodes =====\n"
        "gpu-b-03: finish\ngpu-b-04: finish\n",
        {"rows": ("\ngpu-b-03: success\ngpu-b-04: success", "\ngpu-b-03: failure")},
        NONE,
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_framework_launcher_line_reads_as_its_source_documents_and_names_no_node(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)
    assert explain_text(text).node is None, (f.source, text)


XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
PEER = (
    "gpu-a-07:3117:3190 [0] NCCL WARN socketProgress: Connection closed by remote peer "
    "10.4.0.17<45678>\n"
)
_ACCEL_NB = (
    "RuntimeError: An issue was found when launching the training: \n\n-- Process 0 terminated "
    'with the following error:\nTraceback (most recent call last):\n  File "t.py", line 3\n'
)
# (cause, wrapper) -> the cause's reading
CAUSED = (
    pytest.param(XID, "Global rank 1 (PID 77) exited with code -9\n", id="composer-xid"),
    pytest.param(
        XID,
        "ERROR:composer.cli.launcher:Rank 1 crashed with exit code 1.\n",
        id="composer-crashed-xid",
    ),
    pytest.param(
        PEER,
        "ERROR:composer.cli.launcher:Global rank 0 (PID 9) has still not exited; return exit "
        "code 1.\n",
        id="composer-not-exited-peer",
    ),
    pytest.param(
        XID,
        "subprocess.CalledProcessError: Command '['python', 't.py']' returned non-zero exit "
        "status 1.\n",
        id="accelerate-xid",
    ),
    pytest.param(
        PEER,
        "subprocess.CalledProcessError: Command '['python', 't.py']' died with "
        "<Signals.SIGKILL: 9>.\n",
        id="accelerate-peer",
    ),
    pytest.param(
        XID,
        "Error: failed to run torchrun t.py on gpu-b-03, is localhost: False, exception: "
        "Encountered a bad command exit code!\n\nCommand: 'torchrun t.py'\n\nExit code: 1\n\n"
        "====== Training on All Nodes =====\ngpu-b-03: failure\n",
        id="colossalai-xid",
    ),
)


@pytest.mark.parametrize(("cause", "wrapper"), CAUSED)
def test_a_launcher_wrapper_after_a_cause_keeps_the_causes_reading(
    cause: str, wrapper: str
) -> None:
    alone, both = explain_text(cause), explain_text(cause + wrapper)
    assert (both.category, both.blame, both.node) == (alone.category, alone.blame, alone.node)


def test_a_notebook_launcher_wrapper_keeps_the_workers_own_error() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    got = explain_text(_ACCEL_NB + oom)
    assert (got.category, got.blame, got.node) == (*OOM_GPU, None)


def test_composer_auto_microbatching_retries_before_a_final_oom_read_as_that_oom() -> None:
    text = (
        "/x/composer/trainer/trainer.py:366: RuntimeWarning: CUDA out of memory or excessive "
        "memory allocation retries detected. Train microbatch size will be decreased from 2 -> 1."
        "\nRuntimeError: CUDA out of memory or excessive memory allocation retries detected. The "
        "train loop failed with an internal microbatch of size 1.The GPU does not have enough "
        "memory to process even 1 sample during train.\n"
        "ERROR:composer.cli.launcher:Rank 0 crashed with exit code 1.\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*OOM_GPU, None)
