"""Enroot's GPU hook and image errors as pyxis prints them (correlator/rules/emitters/pyxis.json).

Strings are the emitters' own: NVIDIA/enroot conf/hooks/98-nvidia.sh and src/common.sh
(common::err's "[ERROR] msg", common::runparts' "FILE exited with return code N"),
src/docker.sh and src/runtime.sh (image errors), NVIDIA/pyxis pyxis_slurmstepd.c ("pyxis:
container start failed with error code: %d", "pyxis: printing %s log file:", each enroot line as
"pyxis:     %s"), and libnvidia-container's "nvidia-container-cli: <stage> error: ..." lines
that 98-nvidia.sh's exec of nvidia-container-cli prints. A failure of the node's toolkit or
driver blames the node; an image or option the job gave does not. Never a corpus case."""

from __future__ import annotations

import json
import re
import time
from importlib import resources

import pytest

from correlator.explain import explain_text
from correlator.rules import emitters

_P = "slurmstepd: error: pyxis: "
_START = f"{_P}container start failed with error code: 1\n{_P}printing enroot log file:\n"
_HOOK_FAILED = (
    f"{_P}    [ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return code 1\n"
    f"{_P}couldn't start container\n"
    "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1\n"
)
_IMPORT = f"{_P}failed to import docker image\n{_P}printing enroot log file:\n"
_CREATE = f"{_P}failed to create container filesystem\n{_P}printing enroot log file:\n"
_END = (
    f"{_P}couldn't start container\n"
    "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1\n"
)
_NO_CLI = (
    "[ERROR] Command not found: nvidia-container-cli, "
    "see https://github.com/NVIDIA/libnvidia-container"
)


def _hook(line: str) -> str:
    return f"{_START}{_P}    {line}\n{_HOOK_FAILED}"


def test_a_node_without_nvidia_container_cli_is_blamed_when_pyxis_cannot_start() -> None:
    got = explain_text(_hook(_NO_CLI))
    assert (got.category, got.blame) == ("node", "node")
    assert "nvidia-container-cli" in got.explanation


def test_the_missing_toolkit_is_pinned_to_the_node_srun_names() -> None:
    text = _hook(_NO_CLI) + "srun: error: gpu-b-12: task 0: Exited with exit code 1\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-b-12")


def test_enroot_run_by_hand_without_the_toolkit_blames_the_node() -> None:
    text = f"{_NO_CLI}\n[ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return code 1\n"
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "node")


def test_a_host_command_enroot_needs_missing_on_the_node_blames_the_node() -> None:
    got = explain_text(_hook("[ERROR] Command not found: ldconfig"))
    assert (got.category, got.blame) == ("node", "node")


def test_a_bash_command_not_found_in_the_jobs_script_is_not_enroots() -> None:
    got = explain_text("./train.sh: line 4: torchrun: command not found\n")
    assert got.blame != "node"


@pytest.mark.parametrize(
    "line",
    [
        "nvidia-container-cli: initialization error: nvml error: driver not loaded",
        "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
        "cannot open shared object file: no such file or directory",
        "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch",
        "nvidia-container-cli: ldcache error: process /usr/sbin/ldconfig.real failed with "
        "error code: 1",
    ],
)
def test_libnvidia_container_errors_in_the_gpu_hook_blame_the_node(line: str) -> None:
    got = explain_text(_hook(line))
    assert (got.category, got.blame) == ("node", "node")


@pytest.mark.parametrize(
    "text",
    [
        _hook("[ERROR] Unknown NVIDIA driver capability: compue"),
        _hook(
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please "
            "update your driver to a newer version, or use an earlier cuda container"
        ),
        f"{_IMPORT}{_P}    [INFO] Fetching image manifest\n"
        f"{_P}    [ERROR] URL https://nvcr.io/v2/nvidia/pytorch/manifests/99.99-py3 returned "
        f"error code: 404 Not Found\n{_END}",
        f"{_IMPORT}{_P}    [ERROR] Invalid image reference: docker://nvcr.io/nvidia/pytorch\n{_END}",
        f"{_CREATE}{_P}    [ERROR] No such file or directory: /lustre/img/pytorch.sqsh\n{_END}",
        f"{_CREATE}{_P}    [ERROR] Invalid image format: /lustre/img/pytorch.sqsh\n{_END}",
        f'{_P}error: a container with name "train" does not exist, and --container-image is '
        "not set\nslurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed "
        "with rc=-1\n",
    ],
)
def test_an_image_or_option_the_job_gave_blames_the_job_not_the_node(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == ("user_code", "job")


def test_a_hook_failure_that_says_no_more_does_not_blame_the_node() -> None:
    got = explain_text(f"{_START}{_HOOK_FAILED}")
    assert (got.category, got.blame) == ("node", "unknown")


def test_the_uvm_warning_alone_leaves_a_failed_start_unblamed() -> None:
    warn = (
        "[WARN] Kernel module nvidia_uvm is not loaded. Make sure the NVIDIA device driver is "
        "installed and loaded."
    )
    assert explain_text(_hook(warn)).blame == "unknown"
    assert explain_text(f"{warn}\n").blame == "node"


def test_the_registry_404_rule_stays_linear_on_a_line_of_many_manifest_paths() -> None:
    # a tag is one path segment: a greedy tag would retry every "/manifests/" (quadratic)
    family = json.loads(resources.files(emitters).joinpath("pyxis.json").read_text("utf-8"))
    (rule,) = [r for r in family["rules"] if r["name"] == "enroot_image_not_in_registry"]
    line = "[ERROR] URL https://r" + "/manifests/a" * 20_000 + " returned error code: 500"
    start = time.monotonic()
    assert re.search(rule["pattern"], line) is None
    assert time.monotonic() - start < 0.5
