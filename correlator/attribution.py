"""Which job held the GPU or node an event happened on, and which event caused a job to fail.

Built once per pass from a few batched queries (GPU directory, allocation spans of the nodes the
pass touches) so that attributing each event is a dictionary lookup, not a query.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, Text, cast, func, select
from sqlalchemy.orm import Session

from correlator.holdings import AllocationIndex, GpuDirectory, GpuRef, JobRef
from correlator.rules import classify_event
from correlator.sql import among
from correlator.taxonomy import Blame, Category, Verdict
from timeline import tables as t
from timeline.models import Event, EventKind, Severity

# Events that say something changed but never cause a failure themselves.
NOT_A_CAUSE = frozenset({EventKind.JOB_STATE, EventKind.PROGRESS, EventKind.AGENT})
HARDWARE = frozenset({Category.GPU_HARDWARE, Category.INTERCONNECT, Category.NODE})
# Scheduler words for a job that ended badly (Slurm states; Kubernetes pod phases and reasons).
FAILED_STATES = frozenset(
    {
        "FAILED",
        "NODE_FAIL",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
        "OOMKILLED",
        "ERROR",
        "EVICTED",
        "CRASHLOOPBACKOFF",
    }
)
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING"})


@dataclass(slots=True)
class Ev:
    """A stored event with its verdict and the jobs it belongs to."""

    id: int
    ts: float
    received_ts: float
    node: str | None
    kind: EventKind
    code: int | None
    message: str
    raw: str | None
    payload_raw: Any  # the stored JSON text, decoded on first use (most events never need it)
    count: int
    job_id: str | None
    gpu: GpuRef | None
    gpu_uuid: str | None
    pci_bus_id: str | None
    verdict: Verdict | None = None
    jobs: list[JobRef] = field(default_factory=list)
    severity: str = "info"

    @property
    def payload(self) -> dict[str, Any]:
        """The event's payload dict."""
        raw = self.payload_raw
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                raw = {}
            self.payload_raw = raw if isinstance(raw, dict) else {}
        return self.payload_raw or {}

    def payload_key(self) -> str:
        """A cheap stable key of the payload (its JSON text when not yet decoded)."""
        raw = self.payload_raw
        return raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True, default=str)

    def gpu_key(self) -> str:
        """The most specific GPU identity this event carries ('' for node events)."""
        if self.gpu is not None:
            return self.gpu.uuid
        return self.gpu_uuid or self.pci_bus_id or ""

    def state_word(self) -> str:
        """The scheduler's state word of a JOB_STATE event, upper case ('' if none)."""
        for key in ("state", "to", "new_state", "phase"):
            value = self.payload.get(key)
            if isinstance(value, str) and value:
                return value.split()[0].upper()
        return ""

    def is_job_failure(self) -> bool:
        """A JOB_STATE event saying its job ended badly."""
        if self.kind is not EventKind.JOB_STATE:
            return False
        term = self.payload.get("termination")
        reason = term.get("reason") if isinstance(term, dict) else None
        words = {self.state_word(), str(reason or "").upper()}
        return bool(words & FAILED_STATES) or self.severity in ("error", "critical")

    def is_job_running(self) -> bool:
        """A JOB_STATE event saying its job runs (again)."""
        return self.kind is EventKind.JOB_STATE and self.state_word() in RUNNING_STATES


def select_events() -> Select[Any]:
    """SELECT of the event columns the correlator reads; the payload comes as its JSON text,
    decoded lazily and forgivingly (a malformed payload must not stop the correlator)."""
    e = t.events
    cols = [c for c in e.c if c.name not in ("payload", "dedup_key", "batch_id")]
    return select(*cols, cast(e.c.payload, Text).label("payload"))


def to_ev(row: Any, gpus: GpuDirectory) -> Ev:
    """An Ev from an events row (mapping)."""
    try:
        kind = EventKind(row["kind"])
    except ValueError:
        kind = EventKind.OTHER
    gpu = gpus.resolve(row["node"], row["gpu_uuid"], row["pci_bus_id"])
    return Ev(
        id=row["id"], ts=row["ts"], received_ts=row["received_ts"], node=row["node"], kind=kind,
        code=row["code"], message=row["message"] or "", raw=row["raw"],
        payload_raw=row["payload"] or {},
        count=row["count"] or 1, job_id=row["job_id"], gpu=gpu, gpu_uuid=row["gpu_uuid"],
        pci_bus_id=row["pci_bus_id"], severity=row["severity"],
    )  # fmt: skip


class VerdictCache:
    """classify_event memoized on the event's text and fields: a flood is classified once."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Any, ...], Verdict | None] = {}
        self.classified = 0

    def verdict(self, ev: Ev) -> Verdict | None:
        """The rules' verdict for this event."""
        key = (ev.kind, ev.code, ev.message, ev.raw, ev.payload_key())
        if key in self._cache:
            return self._cache[key]
        event = Event.model_construct(
            ts=ev.ts, node=ev.node, source="store", kind=ev.kind, gpu_uuid=ev.gpu_uuid,
            pci_bus_id=ev.pci_bus_id, job_id=ev.job_id, code=ev.code, severity=Severity.INFO,
            message=ev.message, raw=ev.raw, payload=ev.payload, count=ev.count, dedup_key=None,
        )  # fmt: skip
        verdict = classify_event(event)
        if len(self._cache) > 50_000:  # bounded: distinct texts, not events, fill it
            self._cache.clear()
        self._cache[key] = verdict
        return verdict


def attribute(ev: Ev, index: AllocationIndex) -> list[JobRef]:
    """The jobs an event belongs to: its own job id, else whoever held its GPU/node then."""
    if ev.job_id:
        job = index.jobs.get(ev.job_id)
        return [job] if job else [JobRef(ev.job_id, "unknown")]
    return index.jobs_at(ev.node, ev.ts, ev.gpu)


def cause_score(ev: Ev, ref_ts: float) -> tuple[int, int, float, float]:
    """Higher is a likelier root cause: root-cause flag, priority, confidence, then nearness."""
    v = ev.verdict
    assert v is not None
    return (int(v.root_cause), v.priority, v.confidence, -abs(ref_ts - ev.ts))


def candidate_events(
    session: Session,
    *,
    nodes: Iterable[str],
    since: float,
    until: float,
    gpus: GpuDirectory,
    cache: VerdictCache,
    limit: int = 2000,
) -> list[Ev]:
    """Events on these nodes in [since, until] that could cause a failure, one per flood."""
    e = t.events
    node_list = sorted(set(nodes))
    if not node_list:
        return []
    group = (e.c.node, e.c.kind, e.c.code, e.c.gpu_uuid, e.c.pci_bus_id, e.c.message)
    stmt = (
        select(func.min(e.c.id), func.max(e.c.ts), func.sum(e.c.count))
        .where(among(session, e.c.node, node_list), e.c.ts >= since, e.c.ts <= until)
        .where(e.c.kind.notin_([k.value for k in NOT_A_CAUSE]))
        .group_by(*group)
        .limit(limit)
    )
    groups = {int(r[0]): (float(r[1]), int(r[2] or 1)) for r in session.execute(stmt).all()}
    if not groups:
        return []
    out = []
    for row in session.execute(select_events().where(among(session, e.c.id, groups))).mappings():
        ev = to_ev(row, gpus)
        ev.ts, ev.count = groups[ev.id]  # the newest line of the flood, and its size
        ev.verdict = cache.verdict(ev)
        if ev.verdict is not None:
            out.append(ev)
    return out


def can_explain(v: Verdict) -> bool:
    """Whether this verdict may be named as the cause of a failure.

    Weak signals nobody is blamed for (correctable ECC, a corrected PCIe error: blame unknown,
    confidence under 0.5) happen on healthy nodes every day; near a failure they are
    coincidence, not cause.
    """
    if v.category is None or not v.root_cause:
        return False
    return v.blame is not Blame.UNKNOWN or v.confidence >= 0.5


def best_cause(
    candidates: Iterable[Ev], *, job: JobRef, index: AllocationIndex, ref_ts: float
) -> Ev | None:
    """The likeliest root cause of a job's failure among events on its nodes and GPUs."""
    best: Ev | None = None
    for ev in candidates:
        v = ev.verdict
        if v is None or not can_explain(v):
            continue
        if ev.job_id and ev.job_id != job.job_id:
            continue  # another job's own log line
        if ev.gpu is not None and ev.node is not None:
            held = index.gpus_of(job.job_id, ev.node, min(ev.ts, ref_ts - 1e-6))
            if held is not None and ev.gpu.index not in held:
                continue  # a fault on a GPU this job did not hold
        if best is None or cause_score(ev, ref_ts) > cause_score(best, ref_ts):
            best = ev
    return best
