"""Planning: which incidents get which actions, under which keys, in which mode."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from correlator.flows import correlate_once
from healer.models import ActionKind, ActionMode, BreakerState
from healer.planner import Planner, reset_suffices
from healer.policy import Policy, Scope
from tests.healer.helpers import XID31, XID79, acting, append, cluster, fault, running_job
from timeline.models import Event, EventKind, Severity
from timeline.settings import Settings

NVLINK = (
    "NVRM: Xid (PCI:{bus}): 74, pid=2210, name=python3, NVLink: fatal error detected on link 5"
    "(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
)


def plan(
    factory: sessionmaker[Session], inc_id: int, policy: Policy, breaker: BreakerState | None = None
) -> list:
    with factory() as s:
        inc = incidents.get_incident(s, incident_id=inc_id)
        return Planner(s, policy=policy, breaker=breaker or BreakerState(), now=time.time()).plan(
            inc
        )


def test_gpu_fault_plans_drain_recover_notify_with_stable_keys(
    session_factory: sessionmaker[Session],
) -> None:
    cluster(session_factory, nodes=["node1", "node2"])
    now = time.time()
    running_job(session_factory, "4242", ["node1"], start=now - 600)
    inc = fault(session_factory, XID79, node="node1", ts=now)
    first = plan(session_factory, int(inc.id or 0), acting())
    again = plan(session_factory, int(inc.id or 0), acting())
    assert [(a.kind, a.mode) for a in first] == [
        (ActionKind.DRAIN, ActionMode.ACT),
        (ActionKind.RECOVER, ActionMode.ACT),
        (ActionKind.NOTIFY, ActionMode.ACT),
    ]
    assert [a.key for a in first] == [a.key for a in again]  # a replay plans the same work
    drain, recover, _ = first
    assert drain.key == f"drain:fmtest:node1:i{inc.id}:e0:g0" and drain.partition == "debug"
    assert drain.reason == f"fleetmedic: gpu_hardware Xid 79 [incident {inc.id}]"
    assert (recover.job_id, recover.scheduler, recover.cluster) == ("4242", "slurm", "fmtest")
    # Not keyed on what a scheduler source adds later: one recovery whenever the job shows up.
    assert recover.key == f"recover:4242:i{inc.id}"
    later = plan(
        session_factory, int(inc.id or 0), acting(), BreakerState(epoch=1, reset_ts=now + 1)
    )
    assert [a.kind for a in later] == [ActionKind.RECOVER, ActionKind.NOTIFY]  # old evidence


def test_a_users_fault_only_notifies(session_factory: sessionmaker[Session]) -> None:
    cluster(session_factory, nodes=["node1"])
    now = time.time()
    running_job(session_factory, "77", ["node1"], start=now - 60)
    inc = fault(session_factory, XID31, node="node1", ts=now)
    assert inc.category == "user_code"
    assert [a.kind for a in plan(session_factory, int(inc.id or 0), acting())] == [
        ActionKind.NOTIFY
    ]


def test_low_confidence_is_only_proposed(session_factory: sessionmaker[Session]) -> None:
    cluster(session_factory, nodes=["node1"])
    inc = fault(session_factory, XID79, node="node1", ts=time.time())
    strict = Policy(act=[Scope()], min_confidence=0.99)  # Xid 79 is 0.95
    modes = {a.kind: a.mode for a in plan(session_factory, int(inc.id or 0), strict)}
    assert modes[ActionKind.DRAIN] is ActionMode.PROPOSED
    assert modes[ActionKind.NOTIFY] is ActionMode.ACT  # telling people needs no certainty


def test_interconnect_drains_only_after_repeated_incidents_on_the_node(
    session_factory: sessionmaker[Session],
) -> None:
    cluster(session_factory, nodes=["node1"])
    now = time.time()
    kinds = []
    for i in range(3):  # separate occurrences: more than the dedup window apart
        inc = fault(session_factory, NVLINK, node="node1", ts=now - (2 - i) * 4000)
        assert inc.category == "interconnect"
        kinds.append([a.kind for a in plan(session_factory, int(inc.id or 0), acting())])
    assert kinds == [
        [ActionKind.NOTIFY],
        [ActionKind.NOTIFY],
        [ActionKind.DRAIN, ActionKind.NOTIFY],
    ]


def test_gpu_reset_replaces_the_drain_where_the_xid_catalog_says_reset_suffices(
    session_factory: sessionmaker[Session],
) -> None:
    cluster(session_factory, nodes=["node1"])
    rules = [r.model_copy(update={"gpu_reset": True}) for r in Policy().rules]
    policy = acting(rules=rules, gpu_reset_command=["ssh", "{node}", "nvidia-smi", "-r"])
    uncontained = fault(
        session_factory, XID79.replace(": 79,", ": 95,"), node="node1", ts=time.time()
    )
    assert reset_suffices(uncontained)  # NVIDIA: Xid 95 -> RESET_GPU
    kinds = [a.kind for a in plan(session_factory, int(uncontained.id or 0), policy)]
    assert kinds[0] is ActionKind.RESET_GPU
    off_bus = fault(session_factory, XID79, node="node1", ts=time.time() + 1, bus="0000:5d:00")
    assert not reset_suffices(off_bus)  # Xid 79 needs more than a reset
    assert plan(session_factory, int(off_bus.id or 0), policy)[0].kind is ActionKind.DRAIN


def test_our_own_drain_seen_back_in_the_node_state_plans_nothing(
    session_factory: sessionmaker[Session],
) -> None:
    cluster(session_factory, nodes=["node1"])
    now = time.time()
    text = (
        "slurm node node1 IDLE+DRAIN: fleetmedic: gpu_hardware Xid 79 GPU has fallen off "
        "the bus [incident 3] (set by root)"
    )  # an old-style reason quoting the title
    append(
        session_factory,
        events=[
            Event(
                ts=now,
                node="node1",
                source="slurm",
                kind=EventKind.NODE_STATE,
                severity=Severity.WARNING,
                message=text,
                dedup_key="t1",
                payload={"reason": text},
            )
        ],
    )
    correlate_once(session_factory, settings=Settings(database_url="sqlite://"), now=now + 1)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert inc.category == "gpu_hardware"  # the correlator reads it as a fault...
    assert plan(session_factory, int(inc.id or 0), acting()) == []  # ...we know it is ours
