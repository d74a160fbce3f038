"""Incidents: deterministic fingerprints, dedup of floods into counts, and plain-English text."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from correlator.attribution import HARDWARE, Ev
from correlator.holdings import JobRef
from correlator.models import AffectedJob, Incident, IncidentState
from correlator.taxonomy import Blame, Verdict

MAX_QUOTE = 400  # characters of a raw evidence line quoted in an explanation


def fingerprint(*parts: object) -> str:
    """A stable hash of an incident's identity; the same failure always hashes the same."""
    text = "\x1f".join("" if p is None else str(p) for p in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def identity(ev: Ev, verdict: Verdict, jobs: list[JobRef]) -> tuple[object, ...]:
    """What makes two pieces of evidence the same incident.

    Hardware, node and fabric faults belong to the machine: one incident per category, node and
    GPU whatever jobs ran there. Everything else is the job's: one incident per category and job.
    """
    category = verdict.category.value if verdict.category else None
    if verdict.category in HARDWARE or verdict.blame in (Blame.NODE, Blame.INFRA) or not jobs:
        return ("machine", category, ev.node, ev.gpu_key())
    return ("job", category, jobs[0].job_id)


def _affected(job: JobRef) -> AffectedJob:
    return AffectedJob(
        job_id=job.job_id, scheduler=job.scheduler, user=job.user, account=job.account
    )


class IncidentBook:
    """The open incidents during one pass: evidence merges into them; new ones open."""

    def __init__(
        self, open_incidents: Iterable[Incident], *, dedup_window_s: float, evidence_cap: int
    ) -> None:
        self.by_fp: dict[str, Incident] = {i.fingerprint: i for i in open_incidents}
        self.by_node: dict[str | None, list[Incident]] = {}
        self.by_job: dict[str, list[Incident]] = {}
        for inc in self.by_fp.values():
            self.by_node.setdefault(inc.culprit_node, []).append(inc)
            for job_id in {inc.job_id, *inc.job_ids()} - {None}:
                self.by_job.setdefault(str(job_id), []).append(inc)
        self.dedup_window_s = dedup_window_s
        self.evidence_cap = evidence_cap
        self.changed: dict[str, Incident] = {}
        self.superseded: list[Incident] = []  # open ones a new occurrence replaced
        self.opened = 0
        self._fps: dict[tuple[object, ...], str] = {}
        self._pending: dict[str, list[Any]] = {}  # fp -> [incident, count, first ts, last ts]
        self._jobs_of: dict[str, tuple[Incident, set[str]]] = {}

    def _open(self, fp: str, ev: Ev, verdict: Verdict, job_scoped: JobRef | None) -> Incident:
        inc = Incident(
            fingerprint=fp,
            category=verdict.category.value if verdict.category else None,
            blame=verdict.blame.value,
            title=verdict.summary[:255],
            opened_ts=ev.ts,
            last_seen_ts=ev.ts,
            count=0,
            confidence=verdict.confidence,
            job_id=job_scoped.job_id if job_scoped else None,
            details={"priority": -1},
        )
        if job_scoped is None or ev.gpu is not None:
            inc.culprit_node = ev.node
            if ev.gpu is not None:
                inc.culprit_gpu_uuid, inc.culprit_gpu_index = ev.gpu.uuid, ev.gpu.index
                inc.culprit_pci_bus_id = ev.gpu.pci_bus_id
            else:
                inc.culprit_gpu_uuid, inc.culprit_pci_bus_id = ev.gpu_uuid, ev.pci_bus_id
        self.by_fp[fp] = inc
        self.by_node.setdefault(inc.culprit_node, []).append(inc)
        if inc.job_id:
            self.by_job.setdefault(inc.job_id, []).append(inc)
        self.opened += 1
        return inc

    def get_or_open(self, fp: str, ev: Ev, verdict: Verdict, job_scoped: JobRef | None) -> Incident:
        """The open incident with this fingerprint, or a new occurrence of it."""
        inc = self.by_fp.get(fp)
        if inc is not None:
            pending = self._pending.get(fp)
            last = max(inc.last_seen_ts, pending[3]) if pending else inc.last_seen_ts
            if ev.ts - last > self.dedup_window_s:
                self._apply(fp)
                inc.state, inc.resolved_ts = IncidentState.RESOLVED, inc.last_seen_ts
                inc.resolution = "no new evidence within the dedup window; a new occurrence opened"
                self.superseded.append(inc)
                self.changed.pop(fp, None)
                inc = None
        return inc if inc is not None else self._open(fp, ev, verdict, job_scoped)

    def add(self, ev: Ev, verdict: Verdict, jobs: list[JobRef]) -> Incident:
        """Merge one root-cause event (or flood of it) into its incident."""
        key = identity(ev, verdict, jobs)
        job_scoped = jobs[0] if key[0] == "job" else None
        fp = self._fps.get(key)
        if fp is None:
            fp = self._fps[key] = fingerprint(*key)
        inc = self.get_or_open(fp, ev, verdict, job_scoped)
        # Counts and times add up in plain lists; the model is touched once per pass (flush).
        agg = self._pending.get(fp)
        if agg is None:
            agg = self._pending[fp] = [inc, 0, ev.ts, ev.ts]
        agg[1] += ev.count
        agg[2], agg[3] = min(agg[2], ev.ts), max(agg[3], ev.ts)
        if len(inc.evidence_event_ids) < self.evidence_cap and ev.id not in inc.evidence_event_ids:
            inc.evidence_event_ids.append(ev.id)
        self.raise_root(inc, ev, verdict)
        for job in jobs:
            self.add_job(inc, job)
        self.changed[fp] = inc
        return inc

    def _apply(self, fp: str) -> None:
        agg = self._pending.pop(fp, None)
        if agg is not None:
            inc, count, lo, hi = agg
            inc.count += count
            inc.opened_ts, inc.last_seen_ts = min(inc.opened_ts, lo), max(inc.last_seen_ts, hi)

    def flush(self) -> None:
        """Apply the counts and times gathered since the last flush to the incidents."""
        for fp in list(self._pending):
            self._apply(fp)

    def raise_root(self, inc: Incident, ev: Ev, verdict: Verdict) -> None:
        """Make `ev` the incident's root cause when its verdict is stronger than the root's."""
        if verdict.priority > int(inc.details.get("priority", -1)):
            self.set_root(inc, ev, verdict)

    def set_root(self, inc: Incident, ev: Ev, verdict: Verdict) -> None:
        """Make `ev` the incident's root cause, with its verdict's category, title and action."""
        inc.details["priority"] = verdict.priority
        inc.category = verdict.category.value if verdict.category else None
        inc.blame, inc.title, inc.action = (
            verdict.blame.value,
            verdict.summary[:255],
            verdict.action,
        )
        inc.kind, inc.code, inc.root_cause_event_id = ev.kind.value, ev.code, ev.id
        inc.confidence = max(inc.confidence, verdict.confidence)
        quote = (ev.raw or ev.message or "").strip()
        inc.details["evidence"] = [quote[:MAX_QUOTE]] if quote else []

    def add_job(self, inc: Incident, job: JobRef) -> None:
        """Record that a job was hit by this incident (the first evidence_cap jobs are listed)."""
        seen = self._jobs_of.get(inc.fingerprint)
        if seen is None or seen[0] is not inc:
            seen = self._jobs_of[inc.fingerprint] = (inc, inc.job_ids())
        if job.job_id in seen[1]:
            return
        seen[1].add(job.job_id)
        if len(inc.affected_jobs) < self.evidence_cap:
            inc.affected_jobs.append(_affected(job))
            self.by_job.setdefault(job.job_id, []).append(inc)
        else:
            inc.details["more_affected_jobs"] = int(inc.details.get("more_affected_jobs", 0)) + 1
        self.changed[inc.fingerprint] = inc

    def add_symptoms(self, inc: Incident, events: Iterable[Ev]) -> None:
        """Link events that are consequences of this incident's root cause."""
        for ev in self._append_capped(inc.symptom_event_ids, events):
            inc.last_seen_ts = max(inc.last_seen_ts, ev.ts)
        self.changed[inc.fingerprint] = inc

    def add_evidence(self, inc: Incident, events: Iterable[Ev]) -> None:
        """Quote events as the incident's evidence (the first evidence_cap of them)."""
        self._append_capped(inc.evidence_event_ids, events)
        self.changed[inc.fingerprint] = inc

    def _append_capped(self, ids: list[int], events: Iterable[Ev]) -> list[Ev]:
        """Append the events' ids not yet in `ids` while it is under the cap; the ones added."""
        have, added = set(ids), []
        for ev in events:
            if ev.id in have or len(ids) >= self.evidence_cap:
                continue
            ids.append(ev.id)
            have.add(ev.id)
            added.append(ev)
        return added

    def absorb(self, target: Incident, orphan: Incident, *, why: str) -> None:
        """A root cause found late: the orphan's evidence becomes the target's symptoms."""
        for event_id in orphan.evidence_event_ids + orphan.symptom_event_ids:
            if len(target.symptom_event_ids) >= self.evidence_cap:
                break
            if event_id not in target.symptom_event_ids:
                target.symptom_event_ids.append(event_id)
        for job in orphan.affected_jobs:
            self.add_job(target, JobRef(job.job_id, job.scheduler or "unknown", job.user,
                                        job.account))  # fmt: skip
        target.details.setdefault("culprit", {"method": "hardware_event", "summary": why})
        self.retire(orphan, why=why)
        self.changed[target.fingerprint] = target

    def retire(self, orphan: Incident, *, why: str) -> None:
        """Resolve an open incident whose evidence another incident now holds."""
        orphan.state, orphan.resolved_ts = IncidentState.RESOLVED, orphan.last_seen_ts
        orphan.resolution = f"superseded: {why}"[:255]
        self.by_fp.pop(orphan.fingerprint, None)
        self.changed[orphan.fingerprint] = orphan

    def open_for(self, *, job_id: str) -> list[Incident]:
        """Open incidents that affect or belong to a job."""
        found = {id(i): i for i in self.by_job.get(job_id, ()) if i.state is IncidentState.OPEN}
        return list(found.values())


def _job_text(job: AffectedJob) -> str:
    return f"job {job.job_id}" + (f" (user {job.user})" if job.user else "")


def _subject(inc: Incident) -> str:
    """Where it happened: 'GPU 0000:44:00.0 (index 2) on node-7', 'Job 42 (user a) on node-7'."""
    gpu = inc.culprit_pci_bus_id or inc.culprit_gpu_uuid
    where = f"GPU {gpu}" if gpu else ""
    if gpu and inc.culprit_gpu_index is not None:
        where += f" (index {inc.culprit_gpu_index})"
    if inc.culprit_node:
        where = f"{where} on {inc.culprit_node}" if where else inc.culprit_node
    if inc.job_id:
        own = next((j for j in inc.affected_jobs if j.job_id == inc.job_id), None)
        job = _job_text(own) if own else f"job {inc.job_id}"
        job = job[:1].upper() + job[1:]
        if not where:
            return job
        return f"{job}, {where}" if where.startswith("GPU") else f"{job} on {where}"
    return where or "The fleet"


def explain(inc: Incident) -> str:
    """Plain English, 1-3 sentences: where, what, the evidence, and what to do."""
    others = [j for j in inc.affected_jobs if j.job_id != inc.job_id]
    jobs = [_job_text(j) for j in others[:3]]
    more = len(others) - 3 + int(inc.details.get("more_affected_jobs", 0))
    if more > 0:
        jobs.append(f"{more} more jobs")
    first = f"{_subject(inc)}: {inc.title}"
    if inc.code is not None and inc.kind == "xid" and f"Xid {inc.code}" not in inc.title:
        first += f" (Xid {inc.code})"
    if jobs:
        first += f", affecting {', '.join(jobs)}"
    sentences = [first.rstrip(".") + "."]
    why = []
    evidence = inc.details.get("evidence") or []
    if evidence:
        why.append(f'"{evidence[0]}"' + (f" (seen {inc.count} times)" if inc.count > 1 else ""))
    culprit = inc.details.get("culprit")
    if isinstance(culprit, dict) and culprit.get("summary"):
        why.append(str(culprit["summary"]))
    supporting = inc.details.get("supporting")  # findings that back the root up (edac.py)
    if isinstance(supporting, dict):
        why += [str(s) for s in supporting.values() if s]
    if why:
        sentences.append("Evidence: " + "; ".join(why).rstrip(".") + ".")
    if inc.action:
        sentences.append(f"To do: {inc.action.rstrip('.')}.")
    return " ".join(sentences)
