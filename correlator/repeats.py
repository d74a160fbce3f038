"""User-fault Xids (13/31/43) that keep hitting one GPU under different jobs and users point at
the GPU, not the programs: the engine remembers who faulted where and escalates."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from correlator import tables as ct
from correlator.attribution import Ev
from correlator.rules import USER_FAULT_XIDS, repeated_user_fault, repeated_user_fault_verdict
from correlator.taxonomy import Verdict
from timeline.models import EventKind


class RepeatFaults:
    """(job, user) pairs of user-fault Xids per GPU: past incidents plus this pass's events."""

    def __init__(self, session: Session, *, window_s: float, min_users: int) -> None:
        self.session, self.window_s, self.min_users = session, window_s, min_users
        self.seen: dict[str, set[tuple[str | None, str | None]]] = {}

    def _load(self, gpu_uuid: str, now: float) -> set[tuple[str | None, str | None]]:
        i = ct.incidents
        stmt = select(i.c.affected_jobs, i.c.job_id).where(
            i.c.culprit_gpu_uuid == gpu_uuid,
            i.c.kind == EventKind.XID.value,
            i.c.code.in_(sorted(USER_FAULT_XIDS)),
            i.c.last_seen_ts >= now - self.window_s,
        )
        pairs: set[tuple[str | None, str | None]] = set()
        for affected, job_id in self.session.execute(stmt).all():
            pairs |= {(a.get("job_id"), a.get("user")) for a in affected or []}
            if job_id and not affected:
                pairs.add((job_id, None))
        return pairs

    def escalate(self, ev: Ev) -> Verdict | None:
        """The GPU-hardware verdict when this user fault makes the GPU a repeat offender."""
        if ev.kind is not EventKind.XID or ev.code not in USER_FAULT_XIDS or ev.gpu is None:
            return None
        pairs = self.seen.get(ev.gpu.uuid)
        if pairs is None:
            pairs = self.seen[ev.gpu.uuid] = self._load(ev.gpu.uuid, ev.ts)
        pairs |= {(j.job_id, j.user) for j in ev.jobs}
        if not repeated_user_fault(pairs, min_jobs=self.min_users, min_users=self.min_users):
            return None
        jobs = {j for j, _ in pairs if j}
        users = {u for _, u in pairs if u}
        return repeated_user_fault_verdict(
            ev.code, distinct_jobs=len(jobs), distinct_users=len(users)
        )
