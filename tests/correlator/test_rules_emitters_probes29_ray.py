"""Probe set twenty-nine (Ray): a worker prefix whose actor defines its own __repr__.

Read from ray-project/ray python/ray/_private/worker.py print_worker_logs (prefix_for: the
actor's or task's name, "pid=", then ", ip=" and the node's address for a worker on another node
than the driver's) and Ray's "Customizing prefixes for Actor logs"
(https://docs.ray.io/en/latest/ray-observability/user-guides/configure-logging.html: "Define the
__repr__ method for the Actor class to replace the Actor name with the Actor repr", shown as
"(MyActor(index=2) pid=482120) hello there"), coloured by colorama unless RAY_COLOR_PREFIX=0.
The address in the prefix is the worker's node; a worker that only timed out is never named.
Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

DOC = "https://docs.ray.io/en/latest/ray-observability/user-guides/configure-logging.html"
IPS = ("10.0.0.7", "172.31.12.9", "192.168.100.5")
REPRS = ("MyActor(index=2)", "TrainWorker(rank=3, world_size=16)", "Worker(node_rank=1)")
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"

FORMATS = (
    Fmt(
        "ray-actor-repr-prefix",
        DOC,
        XID79,
        {"repr": REPRS, "pid": (482120, 2461), "ip": IPS},
        ("gpu_hardware", "node"),
        culprit="ip",
        prefixes=(
            "({repr} pid={pid}, ip={ip}) ",
            "\x1b[2m\x1b[36m({repr} pid={pid}, ip={ip})\x1b[0m ",
        ),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_ray_worker_prefix_with_an_actor_repr_names_the_workers_node(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


def test_the_drivers_own_node_prefix_without_an_address_names_no_node() -> None:
    # no ", ip=": the worker is on the driver's node, which the prefix does not name
    assert explain_text("(MyActor(index=2) pid=482120) " + XID79).node is None


_VICTIM = (
    "(TrainWorker(rank=0) pid=2461, ip=10.0.0.8) [E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)


@pytest.mark.parametrize("victim_first", [True, False])
def test_the_faulted_workers_node_is_named_never_the_worker_that_timed_out(
    victim_first: bool,
) -> None:
    fault = "(TrainWorker(rank=1) pid=2977, ip=10.0.0.7) " + XID79
    got = explain_text(_VICTIM + fault if victim_first else fault + _VICTIM)
    assert (got.category, got.node) == ("gpu_hardware", "10.0.0.7"), got.explanation


def test_the_worker_that_timed_out_alone_is_not_named() -> None:
    assert explain_text(_VICTIM).node is None
