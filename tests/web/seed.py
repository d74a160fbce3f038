"""A seeded fleet for the page, browser and metrics tests: backfilled demo history, faults,
idle allocations, incidents from the real correlator, and hostile strings in every field a
cluster user controls (job name, user, account, partition, log lines)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from collector.simulator import DemoFleet
from correlator import service as incidents
from correlator.flows import correlate_once
from timeline import service
from timeline.db import unit_of_work
from timeline.models import Allocation, Batch, Event, EventKind, Job, Scheduler, Severity
from timeline.settings import Settings

# Breaks out of attributes, text, and script strings; sets window.__xss if anything runs.
HOSTILE = '"\'><script>window.__xss=1</script><img src=x onerror="window.__xss=1">{{7*7}}'
HOSTILE_JOB = "6666"


@dataclass
class Seeded:
    """What the seeded fleet holds, for assertions."""

    nodes: list[str]
    failing_incident: int  # the Xid 79 incident (blame node)
    user_incident: int  # the Xid 31 incident (blame job)
    user_fault_job: str
    idle_user: str


def _hostile_batch(node: str, now: float) -> Batch:
    job = Job(
        scheduler=Scheduler.SLURM,
        job_id=HOSTILE_JOB,
        name=HOSTILE,
        user="mallory",
        account=HOSTILE[:100],
        partition=HOSTILE[:100],
        state="RUNNING",
        start_ts=now - 600,
        nodes=[node],
        gpus=1,
    )
    alloc = Allocation(
        scheduler=Scheduler.SLURM, job_id=HOSTILE_JOB, node=node, gpu_index=7, start_ts=now - 600
    )
    event = Event(
        ts=now - 30,
        node=node,
        source="joblog",
        kind=EventKind.OTHER,
        severity=Severity.WARNING,
        job_id=HOSTILE_JOB,
        message=HOSTILE,
        raw=HOSTILE,
    )
    return Batch(
        agent="seed",
        node=node,
        batch_id=uuid.uuid4().hex,
        jobs=[job],
        allocations=[alloc],
        events=[event],
    )


def seed(
    factory: sessionmaker[Session], settings: Settings, *, nodes: int = 8, history_s: float = 2400
) -> Seeded:
    """Backfill `history_s` of a demo fleet, add hostile strings, run the correlator."""
    now = time.time()
    sim = DemoFleet(nodes=nodes, gpus_per_node=8)
    batches = list(sim.backfill(start=now - history_s, now=now, step_s=60.0))
    batches.append(_hostile_batch(sim.node_name(nodes - 3), now))
    for batch in batches:
        with unit_of_work(factory) as session:
            service.append_batch(session, batch=batch)
    correlate_once(factory, settings=settings, now=now)
    correlate_once(factory, settings=settings, now=now + 1)
    with factory() as session:
        found = incidents.list_incidents(session, state="open")
    hw = next(i for i in found if i.kind == "xid" and i.code == 79)
    user = next(i for i in found if i.category == "user_code")
    return Seeded(
        nodes=[sim.node_name(n) for n in range(nodes)],
        failing_incident=int(hw.id or 0),
        user_incident=int(user.id or 0),
        user_fault_job=str(user.job_id),
        idle_user="carol",
    )
