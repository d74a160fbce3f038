"""Emitter families of GPU clusters no rule covered before probe set nineteen (issue #11).

Formats, from each emitter's own source:
- apptainer/apptainer @917d665779 internal/pkg/runtime/launch/launcher_linux.go addGPUBinds:
  sylog.Warningf("Could not find any %s libraries on this host!", "nv"|"rocm") and "... %s files
  ..."; internal/pkg/util/gpu/nvidia.go NVCLIConfigure: exec.LookPath's 'exec:
  "nvidia-container-cli": executable file not found in $PATH', "nvidia-container-cli is not owned
  by root user", "ldconfig is not owned by root user", "/usr/bin not writable in the container",
  "nvidia-container-cli failed with %v: %s"; internal/app/starter/master_linux.go "container
  creation failed: %s" through sylog.Fatalf; pkg/sylog/sylog.go's "%-8s " level prefix.

Verdicts by the label policy (tests/fixtures/corpus/README.md): --nv finding no driver libraries
on the host, or a host without (or with an untrusted) nvidia-container-cli, is the node's GPU
stack (node / node); an image whose /usr/bin cannot take the driver's binaries is the job's
(user_code / job); nvidia-container-cli failing with no message read elsewhere is node / unknown.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

LAUNCHER = "apptainer/apptainer internal/pkg/runtime/launch/launcher_linux.go@917d665779"
NVCCLI = "apptainer/apptainer internal/pkg/util/gpu/nvidia.go@917d665779"

NODE = ("node", "node")
NODE_UNKNOWN = ("node", "unknown")
JOB = ("user_code", "job")

# sylog's "%-8s " prefix, as apptainer prints it alone, under srun's task label, or under pdsh
_FATAL = ("FATAL:   container creation failed: ", "{rank}: FATAL:   container creation failed: ")
_APPT = {"rank": (0, 3, 15)}
APPTAINER = [
    Fmt(
        "apptainer-nv-libraries-missing",
        LAUNCHER,
        "Could not find any {plat} {what} on this host!\n",
        {**_APPT, "plat": ("nv", "rocm"), "what": ("libraries", "files")},
        NODE,
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
        NODE,
    ),
    Fmt(
        "apptainer-nv-libraries-missing-pdsh",
        LAUNCHER,
        "{host}: WARNING: Could not find any nv files on this host!\n"
        "{host}: WARNING: Could not find any nv libraries on this host!\n",
        {"host": HOSTS[:5]},
        NODE,
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


FORMATS = [*APPTAINER]


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
)


@pytest.mark.parametrize("text", BENIGN)
def test_a_benign_breadth19_line_is_no_failure(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), got.explanation


# The user's own program missing from their image (apptainer's action script: '"%s": executable
# file not found in $PATH') is never the node's fault.
USERS_OWN = (
    'FATAL:   "python3": executable file not found in $PATH',
    'FATAL:   container creation failed: exec: "train.sh": executable file not found in $PATH',
)


@pytest.mark.parametrize("text", USERS_OWN)
def test_a_users_own_failure_under_breadth19_never_blames_the_node(text: str) -> None:
    got = explain_text(text)
    assert got.blame != "node" and got.node is None, got.explanation
