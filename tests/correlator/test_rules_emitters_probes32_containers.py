"""Probe set thirty-two (container runtimes): GPU containers Docker/containerd/CRI-O cannot start.

Read from NVIDIA/libnvidia-container src/cli/configure.c @e27a4a7580 (warnx "<kind> error: %s":
initialization, detection, device, mig-config, container, permission, requirement, mount,
ldcache), src/cli/common.c @2e347c1940 (select_devices: "%s: unknown device" for the entry of
NVIDIA_VISIBLE_DEVICES no GPU of the node matches), src/cli/dsl.c @61bfaf38ca ("unsatisfied
condition: %s"); cncf-tags/container-device-interface pkg/cdi/cache.go @05ae4b5bb7
("unresolvable CDI devices %s"); moby/moby daemon/runtime_unix.go @78c2076ac3 ("unknown or
invalid runtime name: %s") and daemon/devices.go ("could not select device driver %q with
capabilities: %v"), which dockerd's logrus line quotes with escaped quotes;
containerd/containerd internal/cri/server/helpers.go @6d0545dc89 ("no runtime for %q is
configured"); opencontainers/runc libcontainer/configs/config.go @6aa4d8d791 ("error running %s
hook #%d: %w", the hook's stdout/stderr quoted) with NVIDIA/nvidia-container-toolkit
internal/info/auto.go @ff86ecb2a5 ("Auto-detected mode as '%v'", the NVIDIA hook's first line);
containers/crun src/libcrun/container.c @c0011b8db9 ("error executing hook `%s`
(exit code: %d)").

The label policy: nvidia-container-cli's initialisation errors and a host without the NVIDIA
runtime are the node's GPU stack (node/node); a GPU index the node does not have, asked for by the
container, is the job's request (user_code/job), as is an image that needs a newer CUDA driver than
the node has (the image's choice, like cudaErrorInsufficientDriver, whose reading
device_plugin.json's container_cuda_requirement already gives). Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

LNC = "NVIDIA/libnvidia-container {}@e27a4a7580"
NODE = ("node", "node")
JOB = ("user_code", "job")

# how the hook's stderr reaches the user: runc's wrapped OCI error, then the hook's own line
_DOCKER = (
    "docker: Error response from daemon: failed to create task for container: failed to create "
    "shim task: OCI runtime create failed: runc create failed: unable to start container process: "
    "error during container init: error running hook #0: error running hook: exit status 1, "
    "stdout: , stderr: Auto-detected mode as 'legacy'\n",
    "Error: failed to create containerd task: failed to create shim task: OCI runtime create "
    "failed: runc create failed: unable to start container process: error during container init: "
    "error running hook #0: error running hook: exit status 1, stdout: , stderr: ",
    "",
)
_JOURNAL = (
    '{mon} {host} dockerd[{pid}]: time="2026-11-29T10:00:01.829815111Z" level=error '
    'msg="Handler for POST /v1.43/containers/3f2a/start returned error: ',
)
_JV = {"mon": ("Nov 29 10:00:01", "Mar  3 07:44:19"), "pid": (10261, 1187), "host": HOSTS}

FORMATS = (
    Fmt(
        "cli-unknown-device-index",
        LNC.format("src/cli/common.c"),
        "nvidia-container-cli: device error: {dev}: unknown device: unknown.\n",
        {"dev": ("4", "8", "15", "0:7", "3:2")},
        JOB,
        prefixes=_DOCKER,
    ),
    Fmt(
        "cli-unknown-device-uuid",
        LNC.format("src/cli/common.c"),
        "nvidia-container-cli: device error: {dev}: unknown device: unknown\n",
        {
            "dev": (
                "GPU-2409b7b6-2df6-0343-90dd-2d73da18e0e8",
                "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
                "0000:3b:00.0",
            )
        },
        NODE,
        prefixes=_DOCKER,
    ),
    Fmt(
        "cli-container-error",
        LNC.format("src/cli/configure.c"),
        "nvidia-container-cli: {kind} error: {msg}: unknown\n",
        {
            "kind": ("container", "permission"),
            "msg": (
                "cgroup subsystem devices not found",
                "capability change failed: operation not permitted",
                "failed to get device cgroup mount path: failed to find cgroup mount point",
            ),
        },
        NODE,
        prefixes=_DOCKER,
    ),
    Fmt(
        "cli-mig-request",
        LNC.format("src/cli/configure.c"),
        "nvidia-container-cli: {kind} error: {msg}: unknown\n",
        {
            "kind": ("mig-config", "mig-monitor"),
            "msg": ("0:1: unknown device", "all: requires CAP_SYS_ADMIN"),
        },
        JOB,
        prefixes=_DOCKER,
    ),
    Fmt(
        "cli-requirement-cuda",
        LNC.format("src/cli/dsl.c"),
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>={v}, please update "
        "your driver to a newer version, or use an earlier cuda container: unknown.\n",
        {"v": ("12.4", "12.9", "11.8", "13.0")},
        JOB,
        prefixes=_DOCKER,
    ),
    Fmt(
        "cli-init-errors",
        LNC.format("src/cli/configure.c"),
        "nvidia-container-cli: {kind} error: {msg}: unknown\n",
        {
            "kind": ("initialization", "detection", "mount", "ldcache"),
            "msg": (
                "nvml error: driver not loaded",
                "load library failed: libnvidia-ml.so.1: cannot open shared object file: no such "
                "file or directory",
                "nvml error: driver/library version mismatch",
                "driver rpc error: timed out",
                "nvml error: unknown error",
                "file creation failed: /var/lib/docker/overlay2/9a1c/merged/run/"
                "nvidia-persistenced/socket: no such device or address",
                "process /sbin/ldconfig.real failed with error code: 1",
            ),
        },
        NODE,
        prefixes=_DOCKER,
    ),
    Fmt(
        "cdi-unresolvable",
        "cncf-tags/container-device-interface pkg/cdi/cache.go@05ae4b5bb7",
        "{wrap}unresolvable CDI devices {devs}{tail}\n",
        {
            "wrap": (
                "docker: Error response from daemon: failed to create task for container: failed "
                "to create shim task: OCI runtime create failed: could not apply required "
                "modification to OCI specification: error modifying OCI spec: failed to inject "
                "CDI devices: ",
                "Error: setting up CDI devices: ",
                "  Warning  Failed  4s  kubelet  Error: failed to create containerd task: failed "
                "to create shim task: OCI runtime create failed: failed to inject CDI devices: ",
            ),
            "devs": (
                "nvidia.com/gpu=all",
                "nvidia.com/gpu=GPU-2409b7b6-2df6-0343-90dd-2d73da18e0e8",
                "nvidia.com/gpu=all, nvidia.com/gds=all",
            ),
            "tail": (": unknown.", "", ": unknown"),
        },
        NODE,
    ),
    Fmt(
        "cdi-unresolvable-index",
        "cncf-tags/container-device-interface pkg/cdi/cache.go@05ae4b5bb7",
        "Error: setting up CDI devices: unresolvable CDI devices {devs}\n",
        {"devs": ("nvidia.com/gpu=7", "nvidia.com/gpu=4, nvidia.com/gpu=5", "nvidia.com/gpu=0:3")},
        JOB,
    ),
    Fmt(
        "docker-unknown-runtime",
        "moby/moby daemon/runtime_unix.go@78c2076ac3",
        "docker: Error response from daemon: unknown or invalid runtime name: {rt}.\n",
        {"rt": ("nvidia",)},
        NODE,
    ),
    Fmt(
        "containerd-no-runtime",
        "containerd/containerd internal/cri/server/helpers.go@6d0545dc89",
        '{wrap}no runtime for "{rt}" is configured\n',
        {
            "wrap": (
                "  Warning  FailedCreatePodSandBox  3s  kubelet  Failed to create pod sandbox: rpc "
                "error: code = Unknown desc = failed to get sandbox runtime: ",
                "Error: failed to create containerd container: ",
            ),
            "rt": ("nvidia", "nvidia-cdi", "nvidia-legacy"),
        },
        NODE,
    ),
    Fmt(
        "runtime-binary-missing",
        "containerd/containerd runtime v2 shim (fork/exec of the configured BinaryName)",
        "  Warning  Failed  12s  kubelet  Error: failed to create containerd task: failed to "
        "create shim task: OCI runtime create failed: unable to retrieve OCI runtime error (open "
        "/run/containerd/io.containerd.runtime.v2.task/k8s.io/9a1c/log.json: no such file or "
        "directory): fork/exec {bin}: no such file or directory: unknown\n",
        {"bin": ("/usr/bin/nvidia-container-runtime", "/usr/local/bin/nvidia-container-runtime")},
        NODE,
    ),
    Fmt(
        "dockerd-no-device-driver",
        "moby/moby daemon/devices.go (quoted by dockerd's logrus line)",
        'could not select device driver \\"{drv}\\" with capabilities: [[gpu]]"\n',
        {**_JV, "drv": ("", "nvidia", "cdi")},
        NODE,
        culprit="host",
        prefixes=_JOURNAL,
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_gpu_container_start_error_reads_as_its_runtime_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


def test_a_failed_nvidia_hook_under_crun_is_the_nodes_stack_with_no_blame_named() -> None:
    text = (
        "Error: crun: error executing hook `/usr/bin/nvidia-container-toolkit` (exit code: 1): "
        "OCI runtime error\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "unknown"), got.explanation


@pytest.mark.parametrize(
    "wrapped",
    [
        "error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as "
        "'legacy': unknown.",
        "error running hook #0: error running hook: exit status 1, stdout: , stderr: "
        "Auto-detected mode as 'legacy'",
        "error running createRuntime hook #1: exit status 2, stdout: , stderr: Auto-detected mode "
        "as 'csv'",
    ],
)
def test_a_failed_nvidia_hook_under_runc_is_the_nodes_stack_not_the_jobs_exit(
    wrapped: str,
) -> None:
    text = (
        "docker: Error response from daemon: failed to create task for container: failed to create "
        "shim task: OCI runtime create failed: runc create failed: unable to start container "
        f"process: error during container init: {wrapped}\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "unknown"), got.explanation


def test_the_hooks_error_on_the_same_logrus_line_decides_and_names_the_host() -> None:
    text = (
        'Nov 29 10:00:01 gpu-a-07 containerd[3862]: time="2026-11-29T10:00:01Z" level=error '
        'msg="StartContainer for \\"8c9e\\" failed" error="failed to create containerd task: '
        "failed to create shim task: OCI runtime create failed: runc create failed: unable to "
        "start container process: error during container init: error running hook #0: error "
        "running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\\n"
        'nvidia-container-cli: device error: 9: unknown device: unknown"\n'
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*JOB, "gpu-a-07"), got.explanation


def test_the_hooks_own_error_explains_cruns_failed_hook() -> None:
    text = (
        "Error: crun: error executing hook `/usr/bin/nvidia-container-toolkit` (exit code: 1): "
        "OCI runtime error\n"
        "nvidia-container-cli: initialization error: nvml error: driver not loaded\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == NODE, got.explanation


@pytest.mark.parametrize(
    "line",
    [
        "nvidia-container-cli: info: GPU 0000:3b:00.0 (GPU-2409b7b6) selected",
        "Auto-detected mode as 'legacy'",
        'time="2026-11-29T10:00:01Z" level=info msg="Using OCI specification file path: '
        '/run/containerd/io.containerd.runtime.v2.task/k8s.io/9a1c/config.json"',
        "INFO[0000] Generated CDI spec with version 0.8.0",
    ],
)
def test_an_informational_container_runtime_line_is_no_failure(line: str) -> None:
    assert explain_text(line + "\n").category is None
