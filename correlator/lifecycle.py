"""Incidents end: resolved when their condition clears, never sticky."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from correlator.attribution import RUNNING_STATES
from correlator.incidents import IncidentBook
from correlator.models import Incident, IncidentState
from correlator.sql import among
from timeline import samples
from timeline import tables as t
from timeline.settings import Settings

_BAD_NODE_WORDS = ("DRAIN", "DOWN", "FAIL", "NOTREADY", "NOT_RESPONDING", "MAINT", "REBOOT")


def _node_unhealthy(state: str | None, unschedulable: bool | None) -> bool:
    word = (state or "").upper().replace(" ", "")
    return bool(unschedulable) or any(w in word for w in _BAD_NODE_WORDS)


def _jobs_running_again(session: Session, job_ids: set[str]) -> dict[str, float]:
    """Job id -> start time of a run of it (or of a requeue of it) that is running now."""
    if not job_ids:
        return {}
    j = t.jobs
    ids = sorted(job_ids)
    stmt = select(j.c.job_id, j.c.requeue_of, j.c.start_ts, j.c.updated_ts).where(
        or_(among(session, j.c.job_id, ids), among(session, j.c.requeue_of, ids)),
        func.upper(j.c.state).in_(sorted(RUNNING_STATES)),
    )
    out: dict[str, float] = {}
    for job_id, requeue_of, start_ts, updated_ts in session.execute(stmt).all():
        key = requeue_of if requeue_of in job_ids else job_id
        out[key] = max(out.get(key, 0.0), float(start_ts or updated_ts or 0.0))
    return out


def _gpus_busy_since(
    session: Session, incidents: list[Incident], busy_util: float, now: float
) -> dict[str, float]:
    """GPU uuid -> newest time it ran above busy_util, for GPUs that incidents blame."""
    uuids = sorted({i.culprit_gpu_uuid for i in incidents if i.culprit_gpu_uuid})
    if not uuids:
        return {}
    since = min(i.last_seen_ts for i in incidents)
    return samples.store().last_above(
        session,
        uuids=uuids,
        field="util_gpu",
        threshold=busy_util,
        since=since,
        until=now,
        inclusive=True,
    )


def _close(inc: Incident, ts: float, why: str) -> None:
    inc.state, inc.resolved_ts, inc.resolution = IncidentState.RESOLVED, ts, why


def resolve_cleared(
    session: Session,
    *,
    book: IncidentBook,
    running: dict[str, float],
    settings: Settings,
    now: float,
) -> list[Incident]:
    """Resolve open incidents whose condition cleared; returns the ones resolved."""
    candidates = [
        i
        for i in book.by_fp.values()
        if i.state is IncidentState.OPEN and i.details.get("detector") != "hang"
    ]
    job_scoped = {i.job_id for i in candidates if i.job_id}
    again = _jobs_running_again(session, job_scoped)
    for job_id, ts in running.items():
        again[job_id] = max(again.get(job_id, 0.0), ts)
    machine = [i for i in candidates if not i.job_id]
    busy = _gpus_busy_since(session, machine, settings.correlator_busy_util, now)
    nodes = {
        r[0]: _node_unhealthy(r[1], r[2])
        for r in session.execute(select(t.nodes.c.name, t.nodes.c.state, t.nodes.c.unschedulable))
    }
    resolved = []
    for inc in candidates:
        why = _why_cleared(inc, again=again, busy=busy, nodes=nodes, settings=settings, now=now)
        if why is not None:
            _close(inc, now, why)
            book.changed[inc.fingerprint] = inc
            resolved.append(inc)
    for inc in resolved:
        book.by_fp.pop(inc.fingerprint, None)
    return resolved


def _why_cleared(
    inc: Incident,
    *,
    again: dict[str, float],
    busy: dict[str, float],
    nodes: dict[str, bool],
    settings: Settings,
    now: float,
) -> str | None:
    quiet = now - inc.last_seen_ts
    if quiet >= settings.correlator_stale_s:
        return f"no new evidence for {settings.correlator_stale_s:.0f} s"
    if inc.job_id:
        if again.get(inc.job_id, 0.0) > inc.last_seen_ts:
            return "the job is running again"
        if quiet >= settings.correlator_quiet_s:
            return f"no new evidence for {settings.correlator_quiet_s:.0f} s"
        return None
    gpu_busy = busy.get(inc.culprit_gpu_uuid or "", 0.0)
    if gpu_busy > inc.last_seen_ts + 30.0:  # ran real work well after the last fault
        return "the GPU is busy again"
    if quiet >= settings.correlator_quiet_s and not nodes.get(inc.culprit_node or "", False):
        return f"the node is healthy and quiet for {settings.correlator_quiet_s:.0f} s"
    return None


def affected_job_ids(incidents: Iterable[Incident]) -> set[str]:
    """Every job id the incidents affect."""
    out: set[str] = set()
    for i in incidents:
        out |= i.job_ids()
    return out
