"""The healer's safety on a real Slurm 22.05 cluster: ownership (a person's drain, a person's
resume), the blast-radius breaker, and return to service behind a validation. Faults come
through the real kernel-log parser and the real correlator; every scontrol call is real."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from benchmarks._slurm_stack import NODES, wait_for
from collector.slurm.runner import SubprocessRunner
from healer import safety, service
from healer.models import ActionState
from healer.slurm import SlurmActor
from healer.steps import HealerContext
from tests.healer.helpers import XID79, acting, by_kind, cluster, context, fault, heal

pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.slow]


class Slurm:
    """The test's own hands on the cluster (a person with scontrol)."""

    def __init__(self, conf: str) -> None:
        self.env = dict(os.environ, SLURM_CONF=conf)

    def run(self, *argv: str, check: bool = True) -> str:
        proc = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=30, check=check
        )
        return proc.stdout

    def node(self, name: str) -> tuple[str, str]:
        out = self.run("scontrol", "-o", "show", "node", name)
        state = out.split("State=")[1].split()[0]
        reason = out.split("Reason=")[1].rsplit(" [", 1)[0] if "Reason=" in out else ""
        return state, reason

    def reset(self) -> None:
        self.run("scancel", "--full", "--user=root")
        for n in NODES:  # (resuming a node that is not drained is an error: ignored)
            self.run("scontrol", "update", f"nodename={n}", "state=resume", check=False)
        wait_for(lambda: all("DRAIN" not in self.node(n)[0] for n in NODES), "nodes resumed")


@pytest.fixture
def slurm(healer_cluster: tuple[Path, str]) -> Iterator[Slurm]:
    s = Slurm(healer_cluster[1])
    s.reset()
    yield s
    s.reset()


@pytest.fixture
def factory(sqlite_factory: sessionmaker[Session]) -> sessionmaker[Session]:
    cluster(sqlite_factory, nodes=list(NODES))
    return sqlite_factory


def ctx_for(
    factory: sessionmaker[Session], slurm: Slurm, tmp_path: Path, **policy: object
) -> HealerContext:
    runner = SubprocessRunner(slurm_conf=slurm.env["SLURM_CONF"])
    actor = SlurmActor(runner, cluster="fmtest", script_dir=tmp_path / "scripts")
    return context(factory, acting(**policy), {"slurm": actor}, runner=runner)


def test_a_persons_drain_is_never_resumed(
    slurm: Slurm, factory: sessionmaker[Session], tmp_path: Path
) -> None:
    slurm.run("scontrol", "update", "nodename=node2", "state=drain", "reason=PSU swap")
    fault(factory, XID79, node="node2", ts=time.time())
    ctx = ctx_for(factory, slurm, tmp_path, validation_command=["true"], return_after_quiet_s=0)
    heal(ctx, passes=3)
    (drain,) = by_kind(factory)["drain"]
    assert drain.state is ActionState.DONE and drain.result["noop"]
    assert drain.result["person_reason"] == "PSU swap"
    assert "return" not in by_kind(factory)  # not ours: never validated, never resumed
    state, reason = slurm.node("node2")
    assert "DRAIN" in state and reason == "PSU swap"
    with factory() as s:
        trail = service.list_audit(s, action_id=int(drain.id or 0))
    assert [e.request for e in trail if e.what == "command"] == [
        ["scontrol", "show", "node", "node2"]
    ]


def test_a_person_resuming_our_drain_cancels_our_workflow_and_nothing_is_left(
    slurm: Slurm, factory: sessionmaker[Session], tmp_path: Path
) -> None:
    fault(factory, XID79, node="node3", ts=time.time())
    ctx = ctx_for(factory, slurm, tmp_path, validation_command=["true"], return_after_quiet_s=3600)
    heal(ctx, passes=2)
    state, reason = slurm.node("node3")
    assert "DRAIN" in state and reason.startswith("fleetmedic: gpu_hardware Xid 79 [incident")
    (ret,) = by_kind(factory)["return"]
    assert ret.state is ActionState.RUNNING  # waits for the fault to go quiet
    slurm.run("scontrol", "update", "nodename=node3", "state=resume")  # a person takes it back
    report = heal(ctx, passes=3)
    assert by_kind(factory)["return"][0].state is ActionState.CANCELLED
    assert "resumed by a person" in str(by_kind(factory)["return"][0].error)
    with factory() as s:
        assert service.held_nodes(s) == []
    assert report.planned == 0 and len(by_kind(factory)["drain"]) == 1  # not drained again
    assert "DRAIN" not in slurm.node("node3")[0] and slurm.node("node3")[1] == ""


def test_an_xid_storm_trips_the_breaker_at_the_cap_and_returns_still_work(
    slurm: Slurm, factory: sessionmaker[Session], tmp_path: Path
) -> None:
    now = time.time()
    for i, node in enumerate(NODES):
        fault(factory, XID79, node=node, ts=now + i * 0.01, bus=f"0000:{0x18 + i:02x}:00")
    ctx = ctx_for(
        factory,
        slurm,
        tmp_path,
        breaker_max_nodes=2,
        breaker_max_fraction=1.0,
        validation_command=["true"],
        return_after_quiet_s=0,
    )
    heal(ctx)
    drains = by_kind(factory)["drain"]
    assert [d.state for d in drains] == [ActionState.DONE, ActionState.DONE, ActionState.CANCELLED]
    assert "cap 2" in str(drains[2].error)
    assert "DRAIN" not in slurm.node("node3")[0]  # the cap, not one node more
    with factory() as s:
        assert service.get_breaker(s).tripped
        alerts = [n for n in service.list_notices(s) if n.subject.endswith("breaker tripped")]
    assert len(alerts) == 1
    # Tripped, yet nodes that validate come back: the breaker never blocks a return.
    heal(ctx, passes=3)
    assert all("DRAIN" not in slurm.node(n)[0] for n in NODES)
    assert [r.state for r in by_kind(factory)["return"]] == [ActionState.DONE] * 2
    # An admin resets it: the storm's old evidence is not replayed as new work...
    with factory.begin() as s:
        safety.reset_breaker(s, by="admin:carol", now=time.time())
    heal(ctx, passes=2)
    assert "DRAIN" not in slurm.node("node3")[0] and len(by_kind(factory)["drain"]) == 3
    # ...but a fault after the reset is.
    fault(factory, XID79, node="node3", ts=time.time() + 1, bus="0000:18:00")
    heal(ctx)
    assert "DRAIN" in slurm.node("node3")[0]


def test_a_failing_validation_keeps_the_node_out_and_a_passing_one_returns_it(
    slurm: Slurm, factory: sessionmaker[Session], tmp_path: Path
) -> None:
    (tmp_path / "ok-node1").touch()  # node1 passes its check, node2 does not
    check = [
        "bash",
        "-c",
        f"test -e {tmp_path}/ok-{{node}} || {{ echo 'dcgm diag: FAIL'; exit 1; }}",
    ]
    ctx = ctx_for(
        factory,
        slurm,
        tmp_path,
        validation_command=check,
        return_after_quiet_s=0,
        breaker_max_fraction=1.0,
    )  # (10 % of 3 nodes would allow only one drain)
    for i, node in enumerate(("node1", "node2")):
        fault(factory, XID79, node=node, ts=time.time() + i * 0.01, bus=f"0000:{0x2A + i:02x}:00")
    heal(ctx, passes=3)
    assert "DRAIN" not in slurm.node("node1")[0]
    state, reason = slurm.node("node2")
    assert "DRAIN" in state and reason.startswith("fleetmedic:")
    returns = {r.node: r for r in by_kind(factory)["return"]}
    assert returns["node1"].state is ActionState.DONE
    assert returns["node2"].state is ActionState.FAILED
    assert "dcgm diag: FAIL" in str(returns["node2"].error)
    with factory() as s:
        held = [h.node for h in service.held_nodes(s)]
        stays = [n for n in service.list_notices(s) if "stays out" in n.subject]
    assert held == ["node2"] and len(stays) == 1
    heal(ctx, passes=2)  # never on a timer alone: no second try behind a person's back
    assert "DRAIN" in slurm.node("node2")[0] and len(by_kind(factory)["return"]) == 2
