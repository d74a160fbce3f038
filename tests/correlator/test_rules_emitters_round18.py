"""Round eighteen: an address that is every host's (bind-all 0.0.0.0, loopback 127.x, multicast)
names no node wherever a host convention carries it. Lines are built from the emitters' own
formats (Ray's raylet, ray-project/ray src/ray/raylet/node_manager.cc @a3d430a66d7b
NodeManager::DisconnectClient; Ray's agent "Raylet is terminated: ip=%s, id=%s"), with made-up
values, never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.explain.hosts import clean_host

_DEAD_WORKER = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. "
    "To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffff01 Worker "
    "ID: ab01 Node ID: 45eb Worker IP address: {ip} Worker port: 10393 Worker PID: 66408 Worker "
    "exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection "
    "error code 2. End of file.\n"
)
_EVERY_HOSTS = ("0.0.0.0", "127.0.0.1", "127.0.1.1", "224.0.0.251")
_ONE_HOSTS = ("10.10.8.7", "172.31.4.250", "192.168.0.12")


@pytest.mark.parametrize(
    ("ip", "node"), [*((a, None) for a in _EVERY_HOSTS), *((a, a) for a in _ONE_HOSTS)]
)
def test_a_dead_ray_workers_address_names_its_node_unless_every_host_has_it(
    ip: str, node: str | None
) -> None:
    got = explain_text(_DEAD_WORKER.format(ip=ip))
    assert (got.category, got.blame, got.node) == ("oom_host", "unknown", node)


@pytest.mark.parametrize(
    ("ip", "node"), [("0.0.0.0", None), ("127.0.0.1", None), ("10.40.7.21", "10.40.7.21")]
)
def test_a_raylet_terminated_on_an_every_host_address_names_no_node(
    ip: str, node: str | None
) -> None:
    text = f"Raylet is terminated: ip={ip}, id=6ad361c6d67a3180. Termination is unexpected.\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", node)


@pytest.mark.parametrize("value", ["0.0.0.0", "127.0.0.1", "239.1.1.1"])
def test_clean_host_refuses_every_hosts_addresses(value: str) -> None:
    assert clean_host(value) is None


@pytest.mark.parametrize("value", ["10.0.0.7", "gpu-a-07", "100.64.0.1"])
def test_clean_host_keeps_one_hosts_addresses_and_names(value: str) -> None:
    assert clean_host(value) == value
