"""Round twenty-four: a device plugin's own crash and the kubelet's lost plugin socket, as their
emitters print them. The Go runtime prints a fatal signal as panic.go's '[signal SIGSEGV:
segmentation violation code=... addr=... pc=...]' and each traceback frame as
pkgpath.(*Type).Method(args); a device plugin serves the kubelet's DevicePlugin gRPC methods
(deviceplugin v1beta1 api.proto); grpc-go wraps a failed dial as 'transport: Error while dialing
%v' (newer: 'Error while dialing: %v') and the plugin sockets live under DevicePluginPath,
/var/lib/kubelet/device-plugins/ (correlator/rules/emitters/device_plugin.json, kubelet.json).
Never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_PANIC = """\
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x1092953]

goroutine 234 [running]:
{frame}(0xc0001bc280, {{0x14cff80, 0xc00045c720}}, 0xc0004427c0)
\t/go/src/plugin/server.go:313 +0x353
"""
# the plugin types of NVIDIA's, HAMi's and Volcano's device plugins, each in its own package
_PLUGINS = (
    "github.com/NVIDIA/k8s-device-plugin/internal/plugin.(*nvidiaDevicePlugin)",
    "github.com/Project-HAMi/HAMi/pkg/device-plugin/nvidiadevice/nvinternal/plugin"
    ".(*NvidiaDevicePlugin)",
    "volcano.sh/k8s-device-plugin/pkg/plugin/vgpu.(*NvidiaDevicePlugin)",
)
_METHODS = (
    "GetDevicePluginOptions",
    "ListAndWatch",
    "GetPreferredAllocation",
    "Allocate",
    "PreStartContainer",
)
# bare, and as kubectl logs shows a containerd-run pod's stderr
_DELIVERIES = ("", "2024-03-07T10:55:48.374277561Z stderr F ")


def _delivered(text: str, prefix: str) -> str:
    return "".join(prefix + ln + "\n" for ln in text.split("\n")[:-1])


@pytest.mark.parametrize("prefix", _DELIVERIES)
@pytest.mark.parametrize("method", _METHODS)
@pytest.mark.parametrize("plugin", _PLUGINS)
def test_a_device_plugin_crashing_in_its_own_rpc_is_the_nodes_gpu_stack(
    plugin: str, method: str, prefix: str
) -> None:
    got = explain_text(_delivered(_PANIC.format(frame=f"{plugin}.{method}"), prefix))
    assert (got.category, got.blame) == ("node", "node"), got.explanation
    assert got.node is None  # a log timestamp or pod stream is not a host


def test_a_go_program_crashing_outside_a_device_plugin_stays_its_own_segfault() -> None:
    got = explain_text(_PANIC.format(frame="main.(*Server).Handle"))
    assert (got.category, got.blame) == ("user_code", "job"), got.explanation


_DIALS = (
    "transport: Error while dialing dial unix {path}: connect: {err}",
    "transport: Error while dialing: dial unix {path}: connect: {err}",
)
_SOCKETS = ("nvidia-gpu.sock", "nvidia.sock", "kubelet.sock")
_ERRS = ("connection refused", "no such file or directory")


@pytest.mark.parametrize("err", _ERRS)
@pytest.mark.parametrize("sock", _SOCKETS)
@pytest.mark.parametrize("dial", _DIALS)
def test_the_kubelet_and_a_plugin_that_cannot_reach_each_other_are_the_nodes(
    dial: str, sock: str, err: str
) -> None:
    desc = dial.format(path=f"/var/lib/kubelet/device-plugins/{sock}", err=err)
    line = f'rpc error: code = Unavailable desc = connection error: desc = "{desc}"\n'
    got = explain_text(line)
    assert (got.category, got.blame) == ("node", "node"), got.explanation


def test_a_dial_to_another_unix_socket_is_not_read_as_the_device_plugins() -> None:
    desc = _DIALS[1].format(path="/var/run/containerd/containerd.sock", err="connection refused")
    got = explain_text(f'connection error: desc = "{desc}"\n')
    assert "device plugin" not in got.explanation, got.explanation
