"""Emitter families of GPU clusters no rule covered before probe set nineteen (issue #11).

Formats, from each emitter's own source:
- apptainer/apptainer @917d665779 internal/pkg/runtime/launch/launcher_linux.go addGPUBinds:
  sylog.Warningf("Could not find any %s libraries on this host!", "nv"|"rocm") and "... %s files
  ..."; internal/pkg/util/gpu/nvidia.go NVCLIConfigure: exec.LookPath's 'exec:
  "nvidia-container-cli": executable file not found in $PATH', "nvidia-container-cli is not owned
  by root user", "ldconfig is not owned by root user", "/usr/bin not writable in the container",
  "nvidia-container-cli failed with %v: %s"; internal/app/starter/master_linux.go "container
  creation failed: %s" through sylog.Fatalf; pkg/sylog/sylog.go's "%-8s " level prefix.
- vllm-project/vllm vllm/v1/engine/exceptions.py @03e79b3611 EngineDeadError "EngineCore
  encountered an issue. See stack trace (above) for the root cause."; v1/executor/
  multiproc_executor.py @00f6c9bf92 "Worker proc %s died unexpectedly, shutting down executor.",
  "Worker failed with error '%s', please check the stack trace above for the root cause",
  "WorkerProc failed to start." / "WorkerProc hit an exception.", "Executor failed."; v1/engine/
  core.py "EngineCore failed to start." / "EngineCore encountered a fatal error."; core_client.py
  "Engine core proc %s died unexpectedly, shutting down client."; v1/engine/utils.py "Engine core
  initialization failed. See root cause above. Failed core proc(s): %s"; engine/
  async_llm_engine.py (V0) "Background loop has errored already."; distributed/
  device_communicators/pynccl_wrapper.py NCCL_CHECK "NCCL error: %s" (ncclGetErrorString);
  v1/worker and v1/core/kv_cache_utils.py "No available memory for the cache blocks. Try
  increasing `gpu_memory_utilization` when initializing the engine.".

Verdicts by the label policy (tests/fixtures/corpus/README.md): --nv finding no driver libraries
on the host, or a host without (or with an untrusted) nvidia-container-cli, is the node's GPU
stack (node / node); an image whose /usr/bin cannot take the driver's binaries is the job's
(user_code / job); nvidia-container-cli failing with no message read elsewhere is node / unknown.
vLLM's engine and worker wrappers ("see the stack trace above") are no verdict by themselves and
never outrank the cause they wrap.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

LAUNCHER = "apptainer/apptainer internal/pkg/runtime/launch/launcher_linux.go@917d665779"
NVCCLI = "apptainer/apptainer internal/pkg/util/gpu/nvidia.go@917d665779"
ENGINE = "vllm-project/vllm vllm/v1/engine/exceptions.py@03e79b3611 (+ core.py, utils.py)"
EXECUTOR = "vllm-project/vllm vllm/v1/executor/multiproc_executor.py@00f6c9bf92"
PYNCCL = "vllm-project/vllm vllm/distributed/device_communicators/pynccl_wrapper.py"
KV = "vllm-project/vllm vllm/v1/core/kv_cache_utils.py"

NODE = ("node", "node")
NODE_UNKNOWN = ("node", "unknown")
JOB = ("user_code", "job")
OOM_GPU = ("oom_gpu", "job")
NET = ("interconnect", "unknown")
NONE = (None, "unknown")

# sylog's "%-8s " prefix, as apptainer prints it alone, under srun's task label, or under pdsh
_FATAL = ("FATAL:   container creation failed: ", "{rank}: FATAL:   container creation failed: ")
_APPT = {"rank": (0, 3, 15)}
APPTAINER = [
    Fmt(
        "apptainer-nv-libraries-missing",
        LAUNCHER,
        "Could not find any {plat} {what} on this host!\n",
        {**_APPT, "plat": ("nv", "rocm"), "what": ("libraries", "files")},
        NODE_UNKNOWN,
        prefixes=("WARNING: ", "{rank}: WARNING: "),
    ),
    Fmt(
        "apptainer-nv-libraries-missing-then-no-gpu",
        LAUNCHER,
        "WARNING: Could not find any nv libraries on this host!\n{then}\n",
        {
            "then": (
                "RuntimeError: No CUDA GPUs are available",
                "RuntimeError: CUDA error: no CUDA-capable device is detected",
            )
        },
        NODE_UNKNOWN,
    ),
    Fmt(
        "apptainer-nv-libraries-missing-pdsh",
        LAUNCHER,
        "{host}: WARNING: Could not find any nv files on this host!\n"
        "{host}: WARNING: Could not find any nv libraries on this host!\n",
        {"host": HOSTS[:5]},
        NODE_UNKNOWN,
        culprit="host",
    ),
    Fmt(
        "apptainer-nvccli-not-found",
        NVCCLI,
        'exec: "nvidia-container-cli": executable file not found in $PATH\n',
        _APPT,
        NODE,
        prefixes=_FATAL,
    ),
    Fmt(
        "apptainer-nvccli-not-root-owned",
        NVCCLI,
        "{bin} is not owned by root user\n",
        {**_APPT, "bin": ("nvidia-container-cli", "ldconfig")},
        NODE,
        prefixes=_FATAL,
    ),
    Fmt(
        "apptainer-nvccli-usr-bin-readonly",
        NVCCLI,
        "/usr/bin not writable in the container\n",
        _APPT,
        JOB,
        prefixes=(
            "INFO:    Consider using either `--fakeroot` or sandbox built with `--fix-perms`\n"
            "FATAL:   container creation failed: ",
            *_FATAL,
        ),
    ),
    Fmt(
        "apptainer-nvccli-failed-driver",
        NVCCLI,
        "nvidia-container-cli failed with exit status 1: nvidia-container-cli: initialization "
        "error: {why}\n",
        {
            **_APPT,
            "why": (
                "nvml error: driver not loaded",
                "load library failed: libnvidia-ml.so.1: cannot open shared object file: no such "
                "file or directory",
                "driver rpc error: timed out",
            ),
        },
        NODE,
        prefixes=_FATAL,
    ),
    Fmt(
        "apptainer-nvccli-failed-image-cuda",
        NVCCLI,
        "nvidia-container-cli failed with exit status 1: nvidia-container-cli: requirement "
        "error: unsatisfied condition: cuda>={cuda}, please update your driver to a newer "
        "version, or use an earlier cuda container\n",
        {**_APPT, "cuda": ("12.4", "11.8")},
        JOB,
        prefixes=_FATAL,
    ),
    Fmt(
        "apptainer-nvccli-failed-no-cause",
        NVCCLI,
        "nvidia-container-cli failed with {how}: \n",
        {**_APPT, "how": ("exit status 1", "signal: killed", "exit status 2")},
        NODE_UNKNOWN,
        prefixes=_FATAL,
    ),
]


# vLLM's log prefixes: the process label decorate_logs() adds, then its logger's own
_VLOG = (
    "(EngineCore_DP0 pid={pid}) ERROR 10-29 08:32:36 [{file}] ",
    "(APIServer pid={pid}) ERROR 09-05 01:15:59 [{file}] ",
    "ERROR {file} ",
    "",
)
_V = {"pid": (137324, 1, 3709), "file": ("core.py:708", "multiproc_executor.py:154")}
VLLM_WRAPPERS = [
    Fmt(
        "vllm-engine-dead",
        ENGINE,
        "{what}\n",
        {
            **_V,
            "what": (
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                "See stack trace (above) for the root cause.",
                "RuntimeError: Engine core initialization failed. See root cause above. Failed "
                "core proc(s): {'EngineCore_DP0': 1}",
                "RuntimeError: Engine core initialization failed. See root cause above. Failed "
                "core proc(s): {}",
                "EngineCore failed to start.",
                "EngineCore encountered a fatal error.",
                "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored "
                "already.",
            ),
        },
        NONE,
        prefixes=_VLOG,
    ),
    Fmt(
        "vllm-worker-wrappers",
        EXECUTOR,
        "{what}\n",
        {
            **_V,
            "what": (
                "Worker proc VllmWorker-0 died unexpectedly, shutting down executor.",
                "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
                "WorkerProc failed to start.",
                "WorkerProc hit an exception.",
                "Exception: WorkerProc initialization failed due to an exception in a "
                "background process. See stack trace for root cause.",
                "RuntimeError: Executor failed.",
            ),
        },
        NONE,
        prefixes=_VLOG,
    ),
    Fmt(
        "vllm-engine-dead-traceback-tail",
        ENGINE,
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/{file}", line {line}, in {fn}\n'
        "    raise {exc}\n{exc}: {msg}\n",
        {
            "file": ("v1/engine/async_llm.py", "v1/engine/utils.py", "v1/engine/core_client.py"),
            "line": (400, 1010, 782),
            "fn": ("generate", "wait_for_engine_startup", "ensure_alive"),
            "exc": (
                "vllm.v1.engine.exceptions.EngineDeadError",
                "RuntimeError",
                "EngineDeadError",
            ),
            "msg": (
                "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                "Engine core initialization failed. See root cause above. Failed core proc(s): {}",
                "EngineCore encountered an issue. See stack trace (above) for the root cause.",
            ),
        },
        NONE,
    ),
]

_CAUSES = {
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.21 GiB is free.": OOM_GPU,
    "RuntimeError: CUDA error: an illegal memory access was encountered": JOB,
    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)": NET,
}
VLLM_CAUSES = [
    Fmt(
        f"vllm-cause-then-wrapper-{i}",
        EXECUTOR,
        "{pfx}" + cause.replace("{", "{{").replace("}", "}}") + "\n{pfx}{wrapper}\n",
        {
            "pfx": ("(EngineCore_DP0 pid=1394) ERROR 03-19 11:07:19 [core.py:1006] ", ""),
            "wrapper": (
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                "See stack trace (above) for the root cause.",
                "RuntimeError: Engine core initialization failed. See root cause above. Failed "
                "core proc(s): {}",
                "Worker proc VllmWorker-0 died unexpectedly, shutting down executor.",
            ),
        },
        want,
    )
    for i, (cause, want) in enumerate(_CAUSES.items())
] + [
    Fmt(
        "vllm-worker-failed-quoting-cause",
        EXECUTOR,
        "RuntimeError: Worker failed with error '{cause}', please check the stack trace above "
        "for the root cause\n",
        {"cause": ("CUDA out of memory. Tried to allocate 20.00 MiB",)},
        OOM_GPU,
    ),
    Fmt(
        "vllm-kv-cache-no-memory",
        KV,
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.\n",
        {"pid": (3709,)},
        OOM_GPU,
        prefixes=("(EngineCore pid={pid}) ", ""),
    ),
    Fmt(
        "vllm-pynccl-error",
        PYNCCL,
        "RuntimeError: NCCL error: {err}\n",
        {
            "err": (
                "unhandled system error (run with NCCL_DEBUG=INFO for details)",
                "remote process exited or there was a network error",
            )
        },
        NET,
        prefixes=("(Worker pid=2730) ERROR ", ""),
    ),
]


FORMATS = [*APPTAINER, *VLLM_WRAPPERS, *VLLM_CAUSES]


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_each_breadth19_format_reads_as_its_emitter_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params([f for f in FORMATS if f.culprit is None]))
def test_a_breadth19_line_that_names_no_host_blames_none(
    f: Fmt, text: str, node: str | None
) -> None:
    assert explain_text(text).node is None, text


BENIGN = (
    # apptainer setting GPUs up as it should
    "INFO:    Setting 'NVIDIA_VISIBLE_DEVICES=all' to emulate legacy GPU binding.",
    "INFO:    Setting --writable-tmpfs (required by nvidia-container-cli)",
    "WARNING: Ignoring --compat32, it requires a GPU option such as --nv or --rocm",
    # vLLM starting and serving
    "(EngineCore_DP0 pid=413) INFO 11-10 12:30:01 [gpu_worker.py:298] Available KV cache "
    "memory: 57.32 GiB",
    "(APIServer pid=1) INFO 03-09 12:56:57 [api_server.py:1880] Starting vLLM API server 0 on "
    "http://0.0.0.0:8000",
)


@pytest.mark.parametrize("text", BENIGN)
def test_a_benign_breadth19_line_is_no_failure(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), got.explanation


# The user's own program missing from their image (apptainer's action script: '"%s": executable
# file not found in $PATH') or a user's CUDA bug under vLLM is never the node's fault.
USERS_OWN = (
    'FATAL:   "python3": executable file not found in $PATH',
    'FATAL:   container creation failed: exec: "train.sh": executable file not found in $PATH',
    "(Worker_TP1 pid=1912) ERROR 06-01 17:32:02 [multiproc_executor.py:671] RuntimeError: CUDA "
    "error: device-side assert triggered\n(EngineCore pid=1709) ERROR 06-01 17:32:04 "
    "[multiproc_executor.py:283] Worker proc VllmWorker-1 died unexpectedly, shutting down "
    "executor.",
)


@pytest.mark.parametrize("text", USERS_OWN)
def test_a_users_own_failure_under_breadth19_never_blames_the_node(text: str) -> None:
    got = explain_text(text)
    assert got.blame != "node" and got.node is None, got.explanation
