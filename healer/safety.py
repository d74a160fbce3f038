"""Safety of the healer: blast-radius breaker, retry budget, escalation, ownership, one healer.

Counts come from the actions table itself, so they survive restarts and cannot drift from what
was done.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from pathlib import Path

from sqlalchemy import Connection, Engine, func, select, text
from sqlalchemy.orm import Session

from correlator import tables as ct
from correlator.models import Incident
from healer import service
from healer import tables as ht
from healer.models import REASON_PREFIX, Action, ActionKind, ActionState, BreakerState
from healer.policy import Policy
from timeline import tables as t

_LOCK_KEY = 0x466C6D48  # "FlmH": one healer per PostgreSQL database
_COUNTED = (ActionState.RUNNING.value, ActionState.DONE.value)


def is_ours(reason: str | None) -> bool:
    """True when a drain reason (or cordon annotation) is one we wrote."""
    return bool(reason) and str(reason).startswith(REASON_PREFIX)


def drain_reason(*, incident_id: int | None, cause: str) -> str:
    """`fleetmedic: <cause> [incident N]`: ours by its prefix, traceable by its incident."""
    cause = " ".join(cause.replace('"', "'").split())[:120]
    return f"{REASON_PREFIX} {cause} [incident {incident_id}]"


# --- blast-radius breaker ---


def drains_since(
    session: Session, *, cluster: str, since: float, partition: str | None = None
) -> int:
    """Drains we started (or finished) in this cluster/partition since `since`, not no-ops."""
    a = ht.actions
    stmt = select(a.c.result, a.c.partition).where(
        a.c.kind == ActionKind.DRAIN.value,
        a.c.cluster == cluster,
        a.c.state.in_(_COUNTED),
        a.c.started_ts >= since,
    )
    n = 0
    for result, part in session.execute(stmt).all():
        if (result or {}).get("noop"):
            continue  # already out (a person's drain): we did not take it out
        if partition is None or part == partition:
            n += 1
    return n


def fleet_size(session: Session, *, cluster: str, partition: str | None = None) -> int:
    """Nodes the scheduler sources know in this cluster (and partition, when given)."""
    stmt = select(t.nodes.c.labels).where(t.nodes.c.cluster == cluster)
    rows = session.execute(stmt).scalars().all()
    if partition is None:
        return len(rows)
    return sum(1 for labels in rows if partition in str((labels or {}).get("partitions", "")))


def breaker_blocks(session: Session, *, policy: Policy, action: Action, now: float) -> str | None:
    """Why this drain may not run now (breaker tripped or its cap reached), else None."""
    breaker = service.get_breaker(session)
    if breaker.tripped:
        return f"blast-radius breaker is tripped ({breaker.reason}); an admin must reset it"
    # A reset starts the count afresh: drains from before it were what the admin looked at.
    since = max(now - policy.breaker_window_s, breaker.reset_ts or 0.0)
    scopes: list[str | None] = [None] + ([action.partition] if action.partition else [])
    for part in scopes:
        count = drains_since(session, cluster=action.cluster, since=since, partition=part)
        cap = policy.breaker_cap(fleet_size(session, cluster=action.cluster, partition=part))
        if count >= cap:
            scope = action.cluster + (f"/{part}" if part else "")
            return f"{count} drains in {scope} within {policy.breaker_window_s:.0f} s (cap {cap})"
    return None


def trip(session: Session, *, reason: str, scope: str, now: float, fence: service.Fence) -> bool:
    """Trip the breaker; True when it was closed before (a person must be alerted once)."""
    breaker = service.get_breaker(session)
    if breaker.tripped:
        return False
    breaker.tripped, breaker.tripped_ts, breaker.reason, breaker.scope = True, now, reason, scope
    service.set_breaker(session, breaker=breaker, now=now, fence=fence)
    return True


def reset_breaker(
    session: Session, *, by: str, now: float, fence: service.Fence = None
) -> BreakerState:
    """An admin closes the breaker; evidence from before now is never replayed as new work."""
    breaker = service.get_breaker(session)
    breaker.tripped, breaker.reason, breaker.scope = False, None, None
    breaker.epoch += 1
    breaker.reset_ts, breaker.reset_by = now, by
    service.set_breaker(session, breaker=breaker, now=now, fence=fence)
    return breaker


# --- retry budget and escalation ---


def recoveries_of(session: Session, *, job_ids: set[str], since: float) -> list[Action]:
    """Done recoveries of any of these jobs since `since`, oldest first."""
    a = ht.actions
    stmt = (
        select(a)
        .where(
            a.c.kind == ActionKind.RECOVER.value,
            a.c.state == ActionState.DONE.value,
            a.c.job_id.in_(sorted(job_ids)),
            a.c.finished_ts >= since,
        )
        .order_by(a.c.finished_ts)
    )
    return [Action.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def recovery_gate(
    session: Session, *, policy: Policy, action: Action, limit: int | None, now: float
) -> tuple[str | None, float | None]:
    """(why not at all, wait until): the job's budget over its whole lineage, and backoff."""
    assert action.job_id is not None
    chain = {action.job_id, service.lineage_root(session, job_id=action.job_id)}
    chain |= {x.new_job_id for x in service.job_lineage(session, job_id=action.job_id)}
    done = recoveries_of(session, job_ids=chain, since=now - policy.requeue_window_s)
    budget = policy.requeue_budget if limit is None else min(limit, policy.requeue_budget)
    if len(done) >= budget:
        return (
            f"retry budget spent: {len(done)} recoveries of this job within "
            f"{policy.requeue_window_s:.0f} s (budget {budget})"
        ), None
    if done:
        wait = policy.requeue_backoff_s * 2 ** (len(done) - 1)
        until = float(done[-1].finished_ts or now) + wait
        if until > now:
            return None, until
    return None, None


def _fatal_on_gpu(session: Session, *, incident: Incident, since: float) -> int:
    """Separate fatal faults of the incident's GPU since `since`: the root-cause events of its
    hardware incidents (a flood of one line is one event with a count, so it counts once)."""
    gpu = incident.culprit_gpu_uuid or incident.culprit_pci_bus_id
    if not gpu or incident.culprit_node is None:
        return 0
    i = ct.incidents
    col = i.c.culprit_gpu_uuid if incident.culprit_gpu_uuid else i.c.culprit_pci_bus_id
    stmt = select(i.c.evidence_event_ids).where(
        i.c.culprit_node == incident.culprit_node,
        col == gpu,
        i.c.category == "gpu_hardware",
        i.c.blame == "node",
        i.c.last_seen_ts >= since,
    )
    ids = {int(e) for row in session.execute(stmt).scalars() for e in row or []}
    if not ids:
        return 0
    ev = t.events
    count = select(func.count()).where(ev.c.id.in_(sorted(ids)), ev.c.ts >= since)
    return int(session.execute(count).scalar_one())


def escalation(
    session: Session, *, policy: Policy, action: Action, incident: Incident | None, now: float
) -> str | None:
    """Why a node we just took out must stay out for a person (contact support), else None.
    `action` is that drain, not yet recorded as done: it counts as one heal."""
    a = ht.actions
    stmt = select(a.c.result).where(
        a.c.kind == ActionKind.DRAIN.value,
        a.c.node == action.node,
        a.c.cluster == action.cluster,
        a.c.state == ActionState.DONE.value,
        a.c.finished_ts >= now - policy.node_heal_window_s,
        a.c.id != (action.id or -1),
    )
    heals = 1 + sum(1 for r in session.execute(stmt).scalars() if not (r or {}).get("noop"))
    if heals >= policy.node_heal_limit:
        days = policy.node_heal_window_s / 86400
        return f"healed {heals} times in {days:g} days: contact support"
    if incident is not None:
        n = _fatal_on_gpu(session, incident=incident, since=now - policy.gpu_fatal_window_s)
        if n >= policy.gpu_fatal_limit:
            gpu = incident.culprit_pci_bus_id or incident.culprit_gpu_uuid
            hours = policy.gpu_fatal_window_s / 3600
            return f"GPU {gpu}: {n} fatal faults in {hours:g} h: contact support"
    returned = select(func.count()).where(
        a.c.kind == ActionKind.RETURN.value,
        a.c.node == action.node,
        a.c.state == ActionState.DONE.value,
        a.c.finished_ts >= now - policy.flap_window_s,
    )
    if int(session.execute(returned).scalar_one()) > 0:
        return "flapping: drained, returned and drained again: contact support"
    return None


# --- one healer per database ---


class HealerLock:
    """One healer per database: a PostgreSQL advisory lock held on its own connection, or an
    exclusive flock on a lock file next to the SQLite database's other lock files."""

    def __init__(self, engine: Engine, *, lock_dir: Path) -> None:
        self.engine = engine
        url = engine.url.render_as_string(hide_password=False)
        key = hashlib.sha1(url.encode()).hexdigest()[:12]
        self.path = lock_dir / f"healer-{key}.lock"
        self._conn: Connection | None = None
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this process holds the lock."""
        return self._conn is not None or self._fd is not None

    def acquire(self) -> bool:
        """Take the lock if free (never waits); True when held."""
        if self.held:
            return True
        if self.engine.dialect.name == "postgresql":
            conn = self.engine.connect()
            got = conn.execute(text("select pg_try_advisory_lock(:k)"), {"k": _LOCK_KEY})
            if got.scalar_one():
                conn.commit()
                self._conn = conn
                return True
            conn.close()
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Give the lock up (the kernel or the server also drops it when this process dies)."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.execute(text("select pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})
                self._conn.commit()
            self._conn.close()
            self._conn = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
