"""One pass over new events: classify, attribute to jobs, merge into incidents, find culprits."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import or_
from sqlalchemy.orm import Session

from correlator.attribution import (
    HARDWARE,
    Ev,
    VerdictCache,
    attribute,
    best_cause,
    can_explain,
    candidate_events,
    select_events,
    to_ev,
)
from correlator.edac import CeStorms
from correlator.holdings import AllocationIndex, GpuDirectory, JobRef, load_jobs
from correlator.incidents import IncidentBook, fingerprint, identity
from correlator.models import CorrelationReport, Incident, IncidentState
from correlator.nccl import RANK_FAILURE_KINDS, Culprit, find_culprit
from correlator.repeats import RepeatFaults
from correlator.rules.signals import after_crash
from correlator.taxonomy import Blame, Category, Verdict
from timeline import tables as t
from timeline.models import EventKind
from timeline.settings import Settings

log = logging.getLogger(__name__)
_LOGGED: set[str] = set()
NCCL_KINDS = frozenset({EventKind.NCCL_TIMEOUT, EventKind.CHILD_FAILED})


class EventPass:
    """Correlates one chunk of events against the store; results land in the IncidentBook."""

    def __init__(
        self,
        session: Session,
        *,
        book: IncidentBook,
        settings: Settings,
        cache: VerdictCache,
        report: CorrelationReport,
    ) -> None:
        self.session, self.book, self.settings = session, book, settings
        self.cache, self.report = cache, report
        self.gpus = GpuDirectory({})
        self.index = AllocationIndex(())
        self.running: dict[str, float] = {}  # job id -> newest "running again" event time
        self.new_ids: set[int] = set()  # events read in this pass (older ones were timed before)
        self.repeats = RepeatFaults(
            session,
            window_s=settings.correlator_repeat_fault_window_s,
            min_users=settings.correlator_repeat_fault_users,
        )
        self.ce_storms = CeStorms(session, book=book)

    def _probe(self, evs: Sequence[Ev]) -> None:
        """Record ingest times of this pass's events that changed an incident (latency)."""
        self.report.incident_event_received_ts += [
            e.received_ts for e in evs if e.id in self.new_ids
        ]

    def _load_context(self, evs_rows: Sequence[Any]) -> None:
        nodes = {r["node"] for r in evs_rows if r["node"]}
        job_ids = {r["job_id"] for r in evs_rows if r["job_id"]}
        s = self.settings
        lo = min(r["ts"] for r in evs_rows) - max(s.correlator_nccl_lookback_s, 3600.0)
        hi = max(r["ts"] for r in evs_rows) + s.correlator_failure_after_s
        self.index = AllocationIndex.load(
            self.session, nodes=nodes, since=lo, until=hi, job_ids=job_ids
        )
        job_nodes = set().union(*self.index.nodes_of.values()) if self.index.nodes_of else set()
        self.gpus = GpuDirectory.load(self.session, nodes=nodes | job_nodes)
        missing = job_ids - set(self.index.jobs)
        if missing:
            for (job_id, _), ref in load_jobs(self.session, job_ids=missing).items():
                self.index.jobs.setdefault(job_id, ref)

    def run(self, rows: Sequence[Any]) -> None:
        """Classify and attribute `rows` (events, oldest id first) and update incidents."""
        if not rows:
            return
        self._load_context(rows)
        self.new_ids = {r["id"] for r in rows}
        failures: dict[str, list[Ev]] = defaultdict(list)
        nccl: dict[str, list[Ev]] = defaultdict(list)
        symptoms: dict[str, list[Ev]] = defaultdict(list)
        for row in rows:
            try:
                ev = to_ev(row, self.gpus)
                ev.verdict = self.cache.verdict(ev)
                ev.jobs = attribute(ev, self.index)
                self.report.events_attributed += bool(ev.jobs)
                self.report.events_classified += ev.verdict is not None
                self._route(ev, failures, nccl, symptoms)
                self.ce_storms.note(ev)
            except Exception as exc:  # one bad event must not stall the cursor for all others
                self._failed(row, exc)
        self.book.flush()
        self._probe(self.ce_storms.file(self.gpus))  # one module's CE lines, summed
        self.report.events_read += len(rows)
        for job_id, evs in nccl.items():
            self._nccl(self._job(job_id), evs, symptoms.get(job_id, []))
        for job_id, evs in failures.items():
            self._failure(self._job(job_id), _strongest(evs))
        for job_id, evs in symptoms.items():
            if not any(i.category for i in self.book.open_for(job_id=job_id)):
                self._failure(self._job(job_id), _strongest(evs))  # the job's only evidence
        self.book.flush()

    def _job(self, job_id: str) -> JobRef:
        return self.index.jobs.get(job_id) or JobRef(job_id, "unknown")

    def _failed(self, row: Any, exc: Exception) -> None:
        self.report.events_failed += 1
        reason = type(exc).__name__
        if reason not in _LOGGED:  # log the first of each kind of failure, count them all
            _LOGGED.add(reason)
            log.warning("correlator skipped event %s: %s: %s", row["id"], reason, exc)

    def _route(
        self,
        ev: Ev,
        failures: dict[str, list[Ev]],
        nccl: dict[str, list[Ev]],
        symptoms: dict[str, list[Ev]],
    ) -> None:
        v = ev.verdict
        if ev.kind is EventKind.JOB_STATE:
            job = ev.job_id or (ev.jobs[0].job_id if ev.jobs else None)
            if job and ev.is_job_failure():
                failures[job].append(ev)
            elif job and ev.is_job_running():
                self.running[job] = max(self.running.get(job, 0.0), ev.ts)
            return
        if ev.kind in NCCL_KINDS and ev.jobs:
            nccl[ev.jobs[0].job_id].append(ev)
            return
        if v is None or ev.kind is EventKind.PROGRESS_STALLED:
            return  # stalls corroborate the hang detector, which reads them itself
        if v.root_cause and not can_explain(v) and not ev.job_id:
            # a weak signal of a node (correctable ECC, corrected PCIe error) is no incident
            # alone; a failure a job's own log reports about itself (ev.job_id) is, however weak
            return
        if v.root_cause:
            if v.category is Category.USER_CODE:
                v = self.repeats.escalate(ev) or v
            inc = self.book.add(ev, v, ev.jobs)
            self._probe([ev])
            self.ce_storms.checked(ev, inc)  # a machine check holds its node's CE storms
            if v.category in HARDWARE and can_explain(v):
                self._adopt_orphans(ev, inc)
        elif v.category is None:
            self._consequence(ev)
        elif not ev.jobs:  # e.g. a timeout no job claims: still worth a look
            self.ce_storms.checked(ev, self.book.add(ev, v, []))
            self._probe([ev])
        else:  # a symptom of a job's failure (peer error, bare exit code): filed if nothing else
            symptoms[ev.jobs[0].job_id].append(ev)

    def _adopt_orphans(self, ev: Ev, inc: Incident) -> None:
        """A hardware fault that arrives after its job's NCCL timeouts were filed as unexplained
        (late kernel log, DCGM) becomes their root cause."""
        lookback = self.settings.correlator_nccl_lookback_s
        for job in ev.jobs:
            orphan = self.book.by_fp.get(fingerprint("nccl", job.job_id))
            culprit = orphan.details.get("culprit") if orphan else None
            if (
                orphan is None
                or not isinstance(culprit, dict)
                or culprit.get("method") != "unknown"
            ):
                continue
            if orphan.opened_ts - lookback <= ev.ts <= orphan.opened_ts:
                why = f"{inc.title} on {ev.node} came before the NCCL timeouts of job {job.job_id}"
                self.book.absorb(inc, orphan, why=why)

    def _consequence(self, ev: Ev) -> None:
        """A consequence (e.g. Xid 45) links to the open incident on its node and GPU, if any."""
        for inc in self.book.by_node.get(ev.node, ()):
            if inc.state is IncidentState.OPEN and inc.culprit_gpu_uuid in (None, ev.gpu_key()):
                self.book.add_symptoms(inc, [ev])
                return

    def _link(self, cause: Ev, job: JobRef, symptoms: list[Ev], culprit: Culprit | None) -> None:
        assert cause.verdict is not None
        key = identity(cause, cause.verdict, [job])
        inc = self.book.by_fp.get(fingerprint(*key))
        if inc is None:
            inc = self.book.add(cause, cause.verdict, [job])
        self.book.add_job(inc, job)
        self.book.add_symptoms(inc, symptoms)
        if culprit is not None and symptoms:
            hosts = sorted({e.node for e in symptoms if e.node})
            shown = ", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4 else "")
            inc.details["culprit"] = {
                "method": culprit.method,
                "summary": f"it came first; the {len(symptoms)} NCCL timeout/worker-failure lines "
                f"of job {job.job_id} on {shown} are its symptoms",
            }
        self._probe(symptoms)

    def _job_events(self, job: JobRef, since: float, until: float) -> list[Ev]:
        """The job's own rank-failure and NCCL lines in a window, from the store."""
        e = t.events
        nodes = sorted(self.index.nodes_of.get(job.job_id, set()))
        kinds = [k.value for k in RANK_FAILURE_KINDS | NCCL_KINDS]
        owner = e.c.job_id == job.job_id
        if nodes:
            owner = or_(owner, e.c.node.in_(nodes) & e.c.job_id.is_(None))
        stmt = (
            select_events()
            .where(owner, e.c.kind.in_(kinds), e.c.ts >= since, e.c.ts <= until)
            .order_by(e.c.ts)
            .limit(5000)
        )
        out = []
        for row in self.session.execute(stmt).mappings():
            ev = to_ev(row, self.gpus)
            ev.jobs = attribute(ev, self.index)
            if any(j.job_id == job.job_id for j in ev.jobs):
                ev.verdict = self.cache.verdict(ev)
                out.append(ev)
        return out

    def _nccl(self, job: JobRef, new: list[Ev], others: list[Ev]) -> None:
        s = self.settings
        first = min(e.ts for e in new)
        evs = self._job_events(job, first - s.correlator_nccl_lookback_s, max(e.ts for e in new))
        timeouts = [e for e in evs if e.kind is EventKind.NCCL_TIMEOUT]
        if not timeouts:
            # Workers failed but no collective timed out: the failure itself says what it can
            # (a rank's signal or exit code) unless a root cause on the job's nodes explains it,
            # weighed against the job's other symptoms (a lost peer) as `explain` weighs them.
            failed = [e for e in new if e.verdict is not None and e.verdict.category is not None]
            if failed:
                self._failure(job, _strongest(failed + others))
            return
        nodes = self.index.nodes_of.get(job.job_id, set()) | {e.node for e in evs if e.node}
        ref = min(e.ts for e in timeouts)
        candidates = candidate_events(
            self.session,
            nodes={n for n in nodes if n},
            since=ref - s.correlator_nccl_lookback_s,
            until=ref + 1.0,
            gpus=self.gpus,
            cache=self.cache,
        )
        culprit = find_culprit(
            job=job,
            timeouts=timeouts,
            failures=[e for e in evs if e.kind in RANK_FAILURE_KINDS],
            child_failed=[e for e in evs if e.kind is EventKind.CHILD_FAILED],
            candidates=candidates,
            index=self.index,
            first_fail_margin_s=s.correlator_first_fail_margin_s,
        )
        symptoms = [e for e in evs if e.kind in NCCL_KINDS]
        if culprit.cause is not None:
            self._link(culprit.cause, job, symptoms, culprit)
            return
        self._nccl_incident(job, timeouts, symptoms, culprit)

    def _nccl_incident(
        self, job: JobRef, timeouts: list[Ev], symptoms: list[Ev], culprit: Culprit
    ) -> Incident:
        verdict = Verdict(
            category=Category.NCCL_TIMEOUT_UNKNOWN,
            blame=Blame.UNKNOWN,
            action=(
                f"check {culprit.node} first (drain it if it is unhealthy), then resubmit "
                "the job from its last checkpoint"
                if culprit.node
                else "resubmit from the last checkpoint with NCCL_DEBUG=INFO and "
                "TORCH_NCCL_DUMP_ON_TIMEOUT=1 to catch the stuck rank"
            ),
            confidence=culprit.confidence,
            summary=f"NCCL collective timed out across ranks of job {job.job_id}",
            priority=10,
        )
        # Quote the culprit rank's own line when there is one.
        head = next((e for e in timeouts if e.payload.get("rank") == culprit.rank), timeouts[0])
        inc = self.book.get_or_open(fingerprint("nccl", job.job_id), head, verdict, job)
        if inc.details.get("priority", -1) < 0:
            self.book.set_root(inc, head, verdict)
        inc.culprit_node = culprit.node
        inc.culprit_gpu_uuid = inc.culprit_pci_bus_id = inc.culprit_gpu_index = None
        inc.confidence = culprit.confidence
        inc.count = sum(e.count for e in timeouts)
        inc.opened_ts = min(inc.opened_ts, head.ts)
        inc.evidence_event_ids = [e.id for e in timeouts][: self.book.evidence_cap]
        inc.details["culprit"] = {
            "method": culprit.method,
            "summary": culprit.summary,
            "rank": culprit.rank,
            **culprit.facts,
        }
        self.book.add_job(inc, job)
        self.book.add_symptoms(inc, symptoms)
        self._probe(symptoms)
        return inc

    def _failure(self, job: JobRef, ev: Ev) -> None:
        """A job ended badly: link it to the likeliest cause, or open an incident of its own."""
        s = self.settings
        mine = [i for i in self.book.open_for(job_id=job.job_id) if i.category]
        if mine:
            best = max(mine, key=lambda i: int(i.details.get("priority", 0)))
            self.book.add_symptoms(best, [ev])
            self._probe([ev])
            return
        nodes = self.index.nodes_of.get(job.job_id, set()) | ({ev.node} if ev.node else set())
        candidates = candidate_events(
            self.session,
            nodes=nodes,
            since=ev.ts - s.correlator_failure_window_s,
            until=ev.ts + s.correlator_failure_after_s,
            gpus=self.gpus,
            cache=self.cache,
        )
        cause = best_cause(candidates, job=job, index=self.index, ref_ts=ev.ts)
        if cause is not None:
            self._link(cause, job, [ev], None)
            return
        if ev.verdict is not None and ev.verdict.category is not None:
            self.book.add(ev, ev.verdict, [job])
            self._probe([ev])


def _strongest(evs: list[Ev]) -> Ev:
    """The event whose verdict says most (root cause, known category, priority), latest on ties;
    a bare SIGKILL beside a rank that crashed is the launcher's teardown (signals.after_crash),
    as `explain` reads it."""
    read = after_crash([e.verdict for e in evs])

    def rank(i: int) -> tuple[int, int, int, float]:
        v = read[i]
        if v is None:
            return (-1, -1, -1, evs[i].ts)
        return (int(v.root_cause), int(v.category is not None), v.priority, evs[i].ts)

    return evs[max(range(len(evs)), key=rank)]
