"""Probe set thirty: the GPU operator's MIG manager, and GPUDirect RDMA's kernel pieces.

MIG manager, read from NVIDIA/mig-parted @bd7160f43f16: pkg/mig/reconfigure/reconfigure.go
(nvidia.com/mig.config.state=failed, "failed to apply MIG configuration: %w", logged by
cmd/nvidia-mig-manager/main.go as log.Errorf("Error: %s")), deployments/container/
reconfigure-mig.sh (the older script's echo lines) and cmd/nvidia-mig-parted/apply
(log.Fatal of "error applying MIG configuration with hooks: ...", "cannot set MIG config on non
MIG-capable GPU", pkg/mig/config 'MIG profile %q not found on this GPU').

GPUDirect: NVIDIA/open-gpu-kernel-modules kernel-open/nvidia-peermem/nvidia-peermem.c @0dd4d36d
(peer_err "nvidia-peermem %s:%d "), Mellanox/nv_peer_memory nv_peer_mem.c ("nv_mem %s:%d "),
the kernel's module loader ("%s: Unknown symbol %s (err %d)"), NVIDIA/gdrcopy @fcec3ce0
src/gdrapi.c ("ERR:  " messages) and src/gdrdrv/gdrdrv.c ("gdrdrv:%s:" printk). Never a corpus
case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

MIG = "NVIDIA/mig-parted {}@bd7160f43f"
PEERMEM = "NVIDIA/open-gpu-kernel-modules kernel-open/nvidia-peermem/nvidia-peermem.c@0dd4d36d"
GDR = "NVIDIA/gdrcopy {}@fcec3ce0bb"
# logrus's text formatter (the mig-manager container's log)
_LOGRUS = ('time="{ts}" level={lvl} msg="',)
_TS = {"ts": ("2025-03-04T10:12:01Z", "2024-11-19T22:05:47Z")}
_KERNEL = ("{mon} {host} kernel: ", "{mon} {host} kernel: [{up}] ")
_KV = {
    "mon": ("Nov 29 10:00:01", "Mar  3 07:44:19"),
    "up": ("  812.004512", "91234.5"),
    "host": HOSTS,
}
NODE = ("node", "node")

MIG_FORMATS = (
    Fmt(
        "mig-manager-failed-apply",
        MIG.format("pkg/mig/reconfigure/reconfigure.go"),
        'Error: failed to apply MIG {what}: {err}"\n',
        {
            **_TS,
            "lvl": ("error",),
            "what": ("configuration", "mode change"),
            "err": ("exit status 1", "error setting MIG mode: In use by another client"),
        },
        NODE,
        prefixes=_LOGRUS,
    ),
    Fmt(
        "mig-parted-apply-fatal",
        MIG.format("cmd/nvidia-mig-parted/apply/apply.go"),
        "Error applying MIG configuration with hooks: error setting MIGConfig: error creating "
        "GPU instance for '{p}': {err}\"\n",
        {
            **_TS,
            "lvl": ("fatal",),
            "p": ("1g.10gb", "3g.40gb"),
            "err": ("Insufficient Resources", "In use by another client"),
        },
        NODE,
        prefixes=_LOGRUS,
    ),
    Fmt(
        "mig-state-label-failed",
        MIG.format("deployments/container/reconfigure-mig.sh"),
        "{line}\n",
        {
            "line": (
                "Changing the 'nvidia.com/mig.config.state' node label to 'failed'",
                "MIG mode change did not take effect after rebooting",
                "Labels:             nvidia.com/mig.config=all-1g.10gb\n"
                "                    nvidia.com/mig.config.state=failed",
                '    nvidia.com/mig.config.state: "failed"',
                # kubectl get node -o json
                '            "nvidia.com/mig.config.state": "failed",',
            )
        },
        NODE,
    ),
    Fmt(
        "mig-config-does-not-fit",
        MIG.format("cmd/nvidia-mig-parted/apply/config.go"),
        '{msg}"\n',
        {
            **_TS,
            "lvl": ("fatal", "error"),
            "msg": (
                "Error applying MIG configuration with hooks: cannot set MIG config on non "
                "MIG-capable GPU",
                "Error: failed to validate MIG configuration: exit status 1",
                "Error selecting MIG config: selected mig-config not present: all-3g.47gb",
                "Error applying MIG configuration with hooks: error setting MIGConfig: MIG "
                'profile "7g.141gb" not found on this GPU',
            ),
        },
        ("node", "infra"),
        prefixes=_LOGRUS,
    ),
)

GPUDIRECT_FORMATS = (
    Fmt(
        "peermem-cannot-register",
        PEERMEM,
        "nvidia-peermem nv_mem_client_init:{line} nv_mem_client_init -- error while "
        "registering {kind} client\n",
        {**_KV, "line": (532, 548), "kind": ("traditional", "nc")},
        NODE,
        culprit="host",
        prefixes=_KERNEL,
    ),
    Fmt(
        "peermem-unknown-symbol",
        "torvalds/linux kernel/module/main.c",
        "{mod}: {what}\n",
        {
            **_KV,
            "mod": ("nvidia_peermem", "nv_peer_mem", "gdrdrv"),
            "what": (
                "Unknown symbol ib_register_peer_memory_client (err -2)",
                "disagrees about version of symbol ib_unregister_peer_memory_client",
                "Unknown symbol nvidia_p2p_get_pages (err -22)",
            ),
        },
        NODE,
        culprit="host",
        prefixes=_KERNEL,
    ),
    Fmt(
        "gpudirect-pin-failed",
        PEERMEM,
        "{line}\n",
        {
            **_KV,
            "line": (
                "nvidia-peermem nv_mem_get_pages:387 error -22 while calling "
                "nvidia_p2p_get_pages()",
                "nvidia-peermem nv_mem_get_pages_nc:456 error -12 while calling "
                "nvidia_p2p_get_pages() with NULL callback",
                "nv_mem nv_mem_get_pages:412 nv_mem_get_pages -- error -22 while calling "
                "nvidia_p2p_get_pages()",
                "nvidia-peermem nv_dma_map:251 nv_dma_map -- error -5 while calling "
                "nvidia_p2p_dma_map_pages()",
                "gdrdrv:__gdrdrv_pin_buffer:nvidia_p2p_get_pages(va=7f2a40000000 len=65536 "
                "p2p_token=0 va_space=0 callback=ffffffffc0a1b2c0) failed [ret = -22]",
                "gdrdrv:gdrdrv_mmap:No address space left for BAR1 mapping.",
            ),
        },
        ("node", "unknown"),
        culprit="host",
        prefixes=_KERNEL,
    ),
    Fmt(
        "gdrapi-no-driver",
        GDR.format("src/gdrapi.c"),
        "ERR:  {msg}\n",
        {
            "msg": (
                "error opening driver (errno=2/No such file or directory)",
                "error opening driver (errno=13/Permission denied)",
                "Error: gdrcopy requires gdrdrv or CUDA driver with dmabuf mmap support (at "
                "least one is required)",
                "The minimum required gdrdrv driver version is 2.4 but the current gdrdrv "
                "version is 2.3",
                "gdrdrv driver requires libgdrapi version 2.4 or above but the current "
                "libgdrapi version is 2.3",
                "Error getting the gdrdrv driver version with ioctl error (errno=25). gdrdrv "
                "might be too old.",
            )
        },
        NODE,
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(MIG_FORMATS))
def test_a_failed_mig_reconfiguration_blames_the_node(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params(GPUDIRECT_FORMATS))
def test_a_gpudirect_module_error_reads_as_the_node_stack(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


def test_mig_managers_exit_status_is_not_read_as_the_jobs() -> None:
    # a launcher's "exit status 1" would be user_code/job: here it is the MIG manager's nvidia-smi
    text = (
        'time="2025-03-04T10:12:01Z" level=error msg="Error: failed to apply MIG configuration: '
        'exit status 1"\n'
    )
    got = explain_text(text)
    assert (got.category, got.blame) == NODE, got.explanation


@pytest.mark.parametrize(
    "line",
    [
        "Changing the 'nvidia.com/mig.config.state' node label to 'success'",
        "Changing the 'nvidia.com/mig.config.state' node label to 'pending'",
        'time="2025-03-04T10:12:01Z" level=info msg="Successfully updated to MIG config: '
        'all-1g.10gb"',
        "Nov 29 10:00:01 gpu-a-07 kernel: gdrdrv:gdrdrv_init:loading gdrdrv version 2.4 built "
        "for open NVIDIA driver",
        "Nov 29 10:00:01 gpu-a-07 kernel: gdrdrv:gdrdrv_init:device registered with major "
        "number 509",
        "WARN: CPU supports MOVDIR64B but the current binary is not compiled with MOVDIR64B "
        "support. Disabling MOVDIR64B usage.",
    ],
)
def test_a_healthy_mig_or_gdrcopy_line_is_no_failure(line: str) -> None:
    assert explain_text(line + "\n").category is None
