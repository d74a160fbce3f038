"""Who held what, when: GPU identities and job allocation spans, loaded once per pass.

Attributing an event to the jobs on its GPU or node is then a dictionary lookup, not a query.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from correlator.sql import among
from timeline import tables as t
from timeline.pci import normalize_pci_bus_id


@dataclass(frozen=True, slots=True)
class JobRef:
    """A job as attribution needs it: who to tell and where it ran."""

    job_id: str
    scheduler: str
    user: str | None = None
    account: str | None = None
    state: str | None = None
    start_ts: float | None = None
    end_ts: float | None = None


@dataclass(frozen=True, slots=True)
class GpuRef:
    """One GPU's identity from the gpus table."""

    uuid: str
    node: str
    index: int | None
    pci_bus_id: str | None


@dataclass(slots=True)
class Span:
    """A job holding one GPU (index >= 0) or a whole node (index -1) from start to end."""

    start: float
    end: float
    gpu_index: int
    gpu_uuid: str | None
    job: JobRef


class GpuDirectory:
    """GPU identities by uuid, by (node, PCI bus id) and by (node, index)."""

    def __init__(self, rows: Iterable[GpuRef]) -> None:
        self.by_uuid: dict[str, GpuRef] = {}
        self.by_pci: dict[tuple[str, str], GpuRef] = {}
        self.by_index: dict[tuple[str, int], GpuRef] = {}
        for g in rows:
            self.by_uuid[g.uuid] = g
            if g.pci_bus_id:
                self.by_pci[(g.node, g.pci_bus_id)] = g
            if g.index is not None:
                self.by_index[(g.node, g.index)] = g

    @classmethod
    def load(cls, session: Session, *, nodes: Iterable[str] | None = None) -> GpuDirectory:
        """The GPUs of these nodes (all GPUs when None)."""
        stmt = select(t.gpus.c.uuid, t.gpus.c.node, t.gpus.c.index, t.gpus.c.pci_bus_id)
        if nodes is not None:
            stmt = stmt.where(among(session, t.gpus.c.node, nodes))
        rows = session.execute(stmt).all()
        return cls(GpuRef(r[0], r[1], r[2], normalize_pci_bus_id(r[3])) for r in rows)

    def resolve(self, node: str | None, uuid: str | None, pci: str | None) -> GpuRef | None:
        """The GPU an event names by uuid or by PCI bus id on its node."""
        if uuid and uuid in self.by_uuid:
            return self.by_uuid[uuid]
        if pci and node:
            return self.by_pci.get((node, normalize_pci_bus_id(pci) or pci))
        return None


class AllocationIndex:
    """Allocation spans of some nodes over a time range, with their jobs, held in memory."""

    def __init__(self, spans: Iterable[tuple[str, Span]]) -> None:
        self.by_node: dict[str, list[Span]] = defaultdict(list)
        self.jobs: dict[str, JobRef] = {}
        self.nodes_of: dict[str, set[str]] = defaultdict(set)
        for node, span in spans:
            self.by_node[node].append(span)
            self.jobs.setdefault(span.job.job_id, span.job)
            self.nodes_of[span.job.job_id].add(node)

    @classmethod
    def load(
        cls,
        session: Session,
        *,
        nodes: Iterable[str] | None,
        since: float,
        until: float,
        job_ids: Iterable[str] = (),
    ) -> AllocationIndex:
        """Spans overlapping [since, until] on these nodes (all when None) or of these jobs."""
        a = t.allocations
        stmt = select(
            a.c.node, a.c.start_ts, a.c.end_ts, a.c.gpu_index, a.c.gpu_uuid, a.c.job_id,
            a.c.scheduler,
        ).where(a.c.start_ts <= until, or_(a.c.end_ts.is_(None), a.c.end_ts >= since))  # fmt: skip
        if nodes is not None:
            wanted = among(session, a.c.node, nodes)
            ids = sorted(set(job_ids))
            stmt = stmt.where(or_(wanted, among(session, a.c.job_id, ids)) if ids else wanted)
        rows = session.execute(stmt).all()
        # Jobs apart, not joined: the jobs key (scheduler, cluster, job_id) cannot serve a join
        # on (job_id, scheduler), and SQLite would scan jobs once per allocation row.
        jobs = load_jobs(session, job_ids={r[5] for r in rows})
        spans = []
        for r in rows:
            job = jobs.get((r[5], r[6])) or JobRef(r[5], r[6])
            spans.append((r[0], Span(r[1], math.inf if r[2] is None else r[2], r[3], r[4], job)))
        return cls(spans)

    def jobs_at(self, node: str | None, ts: float, gpu: GpuRef | None) -> list[JobRef]:
        """Jobs holding this GPU (or, for a node event, anything on the node) at `ts`."""
        if node is None:
            return []
        out: list[JobRef] = []
        for s in self.by_node.get(node, ()):
            if not (s.start <= ts < s.end):
                continue
            if gpu is not None and s.gpu_index >= 0:
                same = s.gpu_uuid == gpu.uuid if s.gpu_uuid else s.gpu_index == gpu.index
                if not same:
                    continue
            if s.job not in out:
                out.append(s.job)
        return out

    def gpus_of(self, job_id: str, node: str, ts: float) -> set[int] | None:
        """GPU indexes the job held on a node at `ts`; None: the whole node, or not known.

        Not known is when no allocation of the job on that node is stored yet (the scheduler
        source polls later than the agents report): no GPU on it may be ruled out then.
        """
        held: set[int] = set()
        known = False
        for s in self.by_node.get(node, ()):
            if s.job.job_id != job_id:
                continue
            known = True
            if s.start <= ts < s.end:
                if s.gpu_index < 0:
                    return None
                held.add(s.gpu_index)
        return held if known else None


def held_gpus(session: Session, *, at: float) -> list[tuple[JobRef, GpuRef, Span]]:
    """Every (job, GPU, allocation span) held at `at`; a whole-node span holds each GPU."""
    index = AllocationIndex.load(session, nodes=None, since=at, until=at)
    gpus = GpuDirectory.load(session)
    on_node: dict[str, list[GpuRef]] = defaultdict(list)
    for g in gpus.by_uuid.values():
        on_node[g.node].append(g)
    out = []
    for node, spans in index.by_node.items():
        for span in spans:
            if not (span.start <= at < span.end):
                continue
            if span.gpu_index < 0:
                out += [(span.job, g, span) for g in on_node.get(node, [])]
                continue
            gpu = gpus.by_uuid.get(span.gpu_uuid or "") or gpus.by_index.get((node, span.gpu_index))
            if gpu is not None:
                out.append((span.job, gpu, span))
    return out


def load_jobs(session: Session, *, job_ids: Iterable[str]) -> dict[tuple[str, str], JobRef]:
    """(job id, scheduler) -> JobRef for these job ids, in chunks of bound parameters."""
    j, ids, out = t.jobs, sorted(set(job_ids)), {}
    cols = (j.c.job_id, j.c.scheduler, j.c.user, j.c.account, j.c.state, j.c.start_ts, j.c.end_ts)
    for i in range(0, len(ids), 5000):
        chunk = ids[i : i + 5000]
        for r in session.execute(select(*cols).where(among(session, j.c.job_id, chunk))).all():
            out[(r[0], r[1])] = JobRef(*r)
    return out
