"""One notifier pass: plan a delivery per incident change, route and recipient; then send.

Planning and recording are transactions; sending happens between them, outside any. A change
is planned once (the table's unique key), and recorded as sent in a transaction that first
calls `fence` (the leadership check), so a stale leader cannot record, and will not re-send, a
delivery another leader owns.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from correlator.models import IdleFinding, Incident, IncidentState
from timeline import queries
from timeline.db import unit_of_work
from timeline.settings import Settings
from web import healerview
from web.notify import service
from web.notify.base import Sink, send_with_retries
from web.notify.models import Delivery, Notice, change_of, severity
from web.notify.routing import OWNER_ROUTE, NotifyConfig

Fence = Callable[[Session], None]
FIRST_LOOKBACK_S = 86400.0


@dataclass
class NotifyReport:
    """What one pass did."""

    planned: int = 0
    sent: int = 0
    failed: int = 0
    resent: int = 0
    deferred: int = 0  # held back by a rate limit


class RateLimiter:
    """At most `per_minute` messages per route in any 60 s."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self.sent: dict[str, deque[float]] = defaultdict(deque)

    def allow(self, route: str, now: float) -> bool:
        """Take one message's worth from the route's budget, if there is any left."""
        q = self.sent[route]
        while q and q[0] <= now - 60.0:
            q.popleft()
        if len(q) >= self.per_minute:
            return False
        q.append(now)
        return True


def notice_for(inc: Incident, *, base_url: str, partitions: list[str], first: bool) -> Notice:
    """The notice of an incident's current state."""
    assert inc.id is not None
    gpu = inc.culprit_pci_bus_id or inc.culprit_gpu_uuid
    return Notice(
        subject_key=f"incident:{inc.id}",
        incident_id=inc.id,
        change=change_of(inc),
        first=first,
        title=inc.title,
        text=inc.explanation,
        severity=severity(inc),
        category=inc.category,
        blame=inc.blame,
        node=inc.culprit_node,
        gpu=gpu,
        jobs=sorted({j for j in [inc.job_id, *inc.job_ids()] if j}),
        users=sorted({j.user for j in inc.affected_jobs if j.user}),
        accounts=sorted({j.account for j in inc.affected_jobs if j.account}),
        partitions=partitions,
        evidence=list(inc.details.get("evidence") or []),
        action=inc.action,
        url=f"{base_url.rstrip('/')}/incidents/{inc.id}",
        opened_ts=inc.opened_ts,
        resolved_ts=inc.resolved_ts,
        group_key=f"{inc.category}|{inc.kind}|{inc.code}|{inc.title}"[:255],
    )


def _owner_notice(n: Notice, job_id: str) -> Notice:
    title = f"Your job {job_id}: {n.title}"
    return n.model_copy(
        update={
            "subject_key": f"{n.subject_key}:job:{job_id}",
            "title": title,
            "group_key": f"owner|{job_id}",
        }
    )


def idle_notice(f: IdleFinding, *, base_url: str) -> Notice:
    """A nudge to the owner of an allocated GPU that does nothing."""
    hours = (f.last_seen_ts - f.idle_since_ts) / 3600.0
    text = (
        f"Job {f.job_id} holds GPU {f.gpu_index} on {f.node}, idle for {hours:.1f} h "
        f"({f.gpu_hours:.1f} GPU-hours, ${f.cost:.2f}). If it is not needed, please release it."
    )
    return Notice(
        subject_key=f"idle:{f.id}",
        change="nudge",
        title=f"Idle GPU held by job {f.job_id}",
        text=text,
        severity="info",
        node=f.node,
        jobs=[f.job_id],
        users=[f.user or ""],
        url=f"{base_url.rstrip('/')}/jobs/{f.job_id}",
        opened_ts=f.idle_since_ts,
        group_key=f"idle|{f.user}",
    )


def _row(n: Notice, route: str, sink: str, to: str, now: float) -> dict[str, Any]:
    return {
        "subject_key": n.subject_key,
        "incident_id": n.incident_id,
        "route": route,
        "sink": sink,
        "recipient": to[:255],
        "change": n.change,
        "group_key": n.group_key,
        "status": "pending",
        "attempts": 0,
        "failures": 0,
        "next_attempt_ts": now,
        "created_ts": now,
        "payload": n.model_dump(mode="json"),
    }


def _partitions(session: Session, inc: Incident) -> list[str]:
    found = set()
    for job_id in sorted({j for j in [inc.job_id, *inc.job_ids()] if j})[:20]:
        job = queries.get_job(session, job_id=job_id)
        if job and job.get("partition"):
            found.add(str(job["partition"]))
    return sorted(found)


def _targets(
    inc: Incident, base: Notice, config: NotifyConfig
) -> list[tuple[Notice, str, str, str]]:
    out = [(base, r.name, r.sink, r.to) for r in config.routes if r.matches(base)]
    if inc.state is IncidentState.OPEN:  # owners hear why their job died, not every update
        for job in inc.affected_jobs:
            target = config.owner_target(job.user)
            if target is not None:
                out.append((_owner_notice(base, job.job_id), OWNER_ROUTE, *target))
    return out


def _healer_notices(
    session: Session, *, config: NotifyConfig, settings: Settings, now: float
) -> list[tuple[Notice, str, str, str]]:
    """The healer's "tell the owner / on-call" messages, handed over once (marked sent there).

    An owner nobody can reach gets a failed delivery row, so the page shows who was not told.
    """
    out: list[tuple[Notice, str, str, str]] = []
    base = settings.notify_base_url.rstrip("/")
    for h in healerview.owner_notices(session):
        assert h.id is not None  # stored notices have ids
        link = f"{base}/incidents/{h.incident_id}" if h.incident_id else f"{base}/remediation"
        n = Notice(
            subject_key=f"healer:{h.id}",
            incident_id=h.incident_id,
            change="notice",
            title=str(h.subject)[:500],
            text=str(h.body),
            severity="warning",
            jobs=[h.job_id] if h.job_id else [],
            users=[h.recipient],
            url=link,
            opened_ts=h.ts,
            group_key=f"healer|{h.key}"[:255],
        )
        if h.kind == "owner":
            target = config.owner_target(h.recipient)
            if target is None:
                row = _row(n, OWNER_ROUTE, "none", str(h.recipient), now)
                row.update(status="failed", last_error=f"no contact for user {h.recipient!r}")
                service.plan(session, rows=[row])
            else:
                out.append((n, OWNER_ROUTE, *target))
        else:
            out += [(n, r.name, r.sink, r.to) for r in config.routes]
        healerview.notice_handed_over(session, notice_id=h.id, ts=now)
    return out


def plan_pass(
    session: Session,
    *,
    config: NotifyConfig,
    settings: Settings,
    since: float,
    now: float,
    seen: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
    fresh: set[tuple[str, str]] | None = None,
) -> int:
    """Plan a delivery for every incident change not yet planned; returns rows planned.

    `seen` holds (subject, change) pairs this process planned in earlier passes, so the open
    incidents re-read each pass cost nothing until they change; this pass's go into `fresh`.
    """
    fresh = set() if fresh is None else fresh
    changed = {i.id: i for i in incidents.list_incidents(session, state="open", limit=5000)}
    for inc in incidents.list_incidents(session, updated_since=since, limit=5000):
        changed.setdefault(inc.id, inc)
    notices: list[tuple[Notice, str, str, str]] = []
    for inc in changed.values():
        key = (f"incident:{inc.id}", change_of(inc))
        if key in seen:
            continue
        fresh.add(key)
        base = notice_for(
            inc, base_url=settings.notify_base_url, partitions=_partitions(session, inc), first=True
        )
        notices += _targets(inc, base, config)
    if settings.notify_idle_nudge_hours is not None:
        need = settings.notify_idle_nudge_hours * 3600.0
        for f in incidents.list_idle_findings(session, state="open", limit=5000):
            target = config.owner_target(f.user)
            key = (f"idle:{f.id}", "nudge")
            if target and f.last_seen_ts - f.idle_since_ts >= need and key not in seen:
                fresh.add(key)
                notices.append(
                    (idle_notice(f, base_url=settings.notify_base_url), OWNER_ROUTE, *target)
                )
    notices += _healer_notices(session, config=config, settings=settings, now=now)
    have = service.known(session, subjects=[n.subject_key for n, *_ in notices])
    told = {(s, r, to) for s, r, to, _ in have}
    rows = []
    for n, route, sink, to in notices:
        if (n.subject_key, route, to[:255], n.change) in have:
            continue
        if n.resolved and (n.subject_key, route, to[:255]) not in told:
            continue  # never told it opened (e.g. routes added later): no lone "resolved"
        n = n.model_copy(update={"first": (n.subject_key, route, to[:255]) not in told})
        rows.append(_row(n, route, sink, to, now))
    return service.plan(session, rows=rows)


@dataclass
class Notifier:
    """The notifier's state across passes: sinks, rate limits and the incident cursor."""

    factory: sessionmaker[Session]
    settings: Settings
    config: NotifyConfig
    sinks: Mapping[str, Sink]
    limiter: RateLimiter = field(init=False)
    cursor: float | None = None
    seen: set[tuple[str, str]] = field(default_factory=set)  # planned by this process

    def __post_init__(self) -> None:
        self.limiter = RateLimiter(self.settings.notify_rate_per_minute)

    def run_once(self, *, fence: Fence | None = None, now: float | None = None) -> NotifyReport:
        """Plan new changes, send what is due, re-send open Alertmanager alerts."""
        started = time.time()  # incidents' updated_ts is wall clock: so is the cursor
        now = started if now is None else now
        report = NotifyReport()
        since = self.cursor if self.cursor is not None else started - FIRST_LOOKBACK_S
        with unit_of_work(self.factory) as session:
            if fence is not None:
                fence(session)
            fresh: set[tuple[str, str]] = set()
            report.planned = plan_pass(
                session, config=self.config, settings=self.settings, since=since - 5.0, now=now,
                seen=self.seen, fresh=fresh,
            )  # fmt: skip
        self.seen |= fresh  # only once the plan committed
        self.cursor = started
        with self.factory() as session:
            pending = service.due(session, now=now)
            resend = service.resend_due(
                session, now=now, every_s=self.settings.notify_alertmanager_resend_s
            )
        self._send(pending, report, fence=fence, now=now)
        self._resend(resend, report, fence=fence, now=now)
        return report

    def _groups(self, rows: list[Delivery]) -> dict[tuple[str, str, str, str], list[Delivery]]:
        groups: dict[tuple[str, str, str, str], list[Delivery]] = defaultdict(list)
        for d in rows:
            group = "" if d.sink == "alertmanager" else (d.group_key or "") + d.change[:6]
            groups[(d.route, d.sink, d.recipient, group)].append(d)
        return groups

    def _send(
        self, rows: list[Delivery], report: NotifyReport, *, fence: Fence | None, now: float
    ) -> None:
        for (route, sink_name, to, _), group in self._groups(rows).items():
            sink = self.sinks.get(sink_name)
            if sink is None or not self.limiter.allow(route, now):
                report.deferred += len(group)
                continue
            error = send_with_retries(
                sink,
                [d.notice() for d in group],
                recipient=to,
                attempts=self.settings.notify_retry_attempts,
                backoff_s=self.settings.notify_backoff_s,
            )
            ids = [d.id for d in group]
            with unit_of_work(self.factory) as session:
                if fence is not None:
                    fence(session)
                if error is None:
                    service.mark_sent(session, ids=ids, now=time.time())
                else:
                    service.mark_failed(
                        session, ids=ids, error=error, now=time.time(), settings=self.settings
                    )
            report.sent += len(ids) if error is None else 0
            report.failed += len(ids) if error is not None else 0

    def _resend(
        self, rows: list[Delivery], report: NotifyReport, *, fence: Fence | None, now: float
    ) -> None:
        by_target: dict[tuple[str, str], list[Delivery]] = defaultdict(list)
        for d in rows:
            by_target[(d.sink, d.recipient)].append(d)
        for (sink_name, to), group in by_target.items():
            sink = self.sinks.get(sink_name)
            if sink is None:
                continue
            error = send_with_retries(
                sink, [d.notice() for d in group], recipient=to, attempts=1, backoff_s=0.0
            )
            with unit_of_work(self.factory) as session:
                if fence is not None:
                    fence(session)
                ids = [d.id for d in group]
                if error is None:
                    service.touch_sent(session, ids=ids, now=now)
                    report.resent += len(ids)
                else:
                    service.count_failure(session, ids=ids, error=error)
