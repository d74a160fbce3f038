"""Building the healer's inputs through the real store API, the real kernel-log parser and the
real correlator (no hand-made incidents), and running healer passes."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from collector.parse.kernel import parse_kernel_line
from correlator import service as incidents
from correlator.flows import correlate_once
from correlator.models import Incident
from healer import service
from healer.jobs import heal_once
from healer.models import Action, HealReport
from healer.policy import Policy, Scope
from healer.steps import Actor, HealerContext
from timeline import service as store
from timeline.db import unit_of_work
from timeline.models import Allocation, Batch, Event, Job, Node, Scheduler
from timeline.settings import Settings

# The kernel's own Xid lines (formats as in tests/correlator/correlator_fleet.py, which cites
# their sources); {bus} is the GPU's PCI bus id as the kernel prints it.
XID79 = "NVRM: Xid (PCI:{bus}): 79, pid=1234, name=python3, GPU has fallen off the bus."
XID31 = (
    "NVRM: Xid (PCI:{bus}): 31, pid=404, name=python3, channel 0x0000000a, intr 00000000. "
    "MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_4 faulted @ 0xdea_d0000000. Fault is of type "
    "FAULT_PDE ACCESS_TYPE_VIRT_WRITE"
)


def acting(**kw: Any) -> Policy:
    """A policy that acts everywhere (the default observes), with overrides."""
    return Policy(act=[Scope()], **kw)


def append(factory: sessionmaker[Session], **items: Any) -> None:
    """Store one batch the way ingest does."""
    batch = Batch(agent="test", node="server:test", batch_id=uuid.uuid4().hex, **items)
    with unit_of_work(factory) as s:
        store.append_batch(s, batch=batch)


def kernel_event(line: str, *, node: str, ts: float) -> Event:
    """What the node agent's kernel-log parser makes of a kernel line."""
    event = parse_kernel_line(line, node=node, ts=ts)
    assert event is not None, line
    event.dedup_key = f"test:{uuid.uuid4().hex}"
    return event


def cluster(
    factory: sessionmaker[Session],
    *,
    nodes: list[str],
    scheduler: Scheduler = Scheduler.SLURM,
    cluster_name: str = "fmtest",
    partition: str = "debug",
) -> None:
    """Nodes as a scheduler source reports them."""
    append(
        factory,
        nodes=[
            Node(
                name=n,
                scheduler=scheduler,
                cluster=cluster_name,
                state="IDLE",
                labels={"partitions": partition},
            )
            for n in nodes
        ],
    )


def running_job(
    factory: sessionmaker[Session],
    job_id: str,
    nodes: list[str],
    *,
    start: float,
    scheduler: Scheduler = Scheduler.SLURM,
    cluster_name: str = "fmtest",
    user: str = "alice",
    account: str = "ml-research",
    **extra: Any,
) -> None:
    """A running job holding whole nodes, as the scheduler source stores it."""
    job = Job(
        scheduler=scheduler,
        job_id=job_id,
        cluster=cluster_name,
        user=user,
        account=account,
        state="RUNNING",
        start_ts=start,
        nodes=nodes,
        gpus=8 * len(nodes),
        partition="debug" if scheduler is Scheduler.SLURM else None,
        **extra,
    )
    allocs = [Allocation(scheduler=scheduler, job_id=job_id, node=n, start_ts=start) for n in nodes]
    append(factory, jobs=[job], allocations=allocs)


def fault(
    factory: sessionmaker[Session], line: str, *, node: str, ts: float, bus: str = "0000:3b:00"
) -> Incident:
    """A kernel line arrives from a node's agent; the correlator's pass opens its incident."""
    append(factory, events=[kernel_event(line.format(bus=bus), node=node, ts=ts)])
    correlate_once(factory, settings=Settings(database_url="sqlite://"), now=ts + 0.5)
    with factory() as s:
        found = incidents.list_incidents(s, node=node, state="open", limit=5)
        if not found:  # a user's fault is the job's incident, with no culprit node
            found = incidents.list_incidents(s, state="open", limit=5)
    assert found, f"no incident for {line!r}"
    return found[0]


def context(
    factory: sessionmaker[Session], policy: Policy, actors: dict[str, Actor], **kw: Any
) -> HealerContext:
    """A healer context with short waits."""
    return HealerContext(
        factory=factory, policy=policy, actors=actors, checkpoint_settle_s=0.01, **kw
    )


def heal(ctx: HealerContext, passes: int = 1) -> HealReport:
    """Run healer passes; the report of the last one."""
    report = HealReport()
    for _ in range(passes):
        report = heal_once(ctx)
    return report


def actions(factory: sessionmaker[Session], **filters: Any) -> list[Action]:
    """Actions, oldest first."""
    with factory() as s:
        return list(reversed(service.list_actions(s, limit=1000, **filters)))


def by_kind(factory: sessionmaker[Session]) -> dict[str, list[Action]]:
    """Actions grouped by kind, oldest first."""
    out: dict[str, list[Action]] = {}
    for a in actions(factory):
        out.setdefault(a.kind.value, []).append(a)
    return out
