"""Idle-GPU findings: allocated GPUs doing nothing, with GPU-hours and cost wasted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from correlator import service
from correlator.holdings import held_gpus
from correlator.models import IdleFinding, IncidentState
from timeline import samples
from timeline.settings import Settings


def _allocated_gpus(session: Session, now: float) -> dict[tuple[str, str], dict[str, Any]]:
    """(job id, GPU uuid) -> allocation facts, for GPUs held right now."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for job, gpu, span in held_gpus(session, at=now):
        out[(job.job_id, gpu.uuid)] = {
            "job_id": job.job_id, "scheduler": job.scheduler, "user": job.user,
            "account": job.account, "node": gpu.node, "start_ts": span.start,
            "index": gpu.index, "pci": gpu.pci_bus_id,
        }  # fmt: skip
    return out


def _window_stats(
    session: Session, uuids: list[str], since: float, until: float, threshold: float
) -> dict[str, tuple[float, float, float | None, float | None]]:
    """uuid -> (first ts, last ts, newest busy ts or None, max util) of samples in the window
    that carry a utilization."""
    if not uuids:
        return {}
    store = samples.store()
    stats = store.window_stats(session, uuids=uuids, since=since, until=until, fields=["util_gpu"])
    busy = store.last_above(
        session, uuids=uuids, since=since, until=until, field="util_gpu", threshold=threshold
    )
    out = {}
    for uuid, w in stats.items():
        util = w.fields["util_gpu"]
        if util.count and util.first_ts is not None and util.last_ts is not None:
            out[uuid] = (util.first_ts, util.last_ts, busy.get(uuid), util.max)
    return out


def window_s(settings: Settings) -> float:
    """How far back a cold pass reads: the minimum idle duration, two passes and a minute."""
    return settings.idle_min_duration_s + 2 * settings.idle_interval_s + 60.0


# Telemetry this late (behind the newest pass) still counts: a warm pass re-reads this much.
LATE_S = 120.0
Seen = tuple[float, float, float | None]  # first ts, last ts, newest busy ts


@dataclass
class IdleTracker:
    """What each held GPU's utilization showed over the passes so far, so that a pass reads
    only the telemetry since the last one (plus LATE_S), not the whole idle window.

    The idle window is 33 minutes by default; reading it for every held GPU each minute grows
    with the window (at 100k GPUs on VictoriaMetrics, 18 s of a minute with ten minutes of
    data). A GPU new to the tracker, or every GPU when the tracker cannot vouch for the
    passes in between (another replica ran them, another store, time went back), gets the
    full window read, as before. A busy sample that arrives more than LATE_S after the pass
    that should have seen it is missed until the GPU's next busy one.
    """

    key: tuple[Any, ...] | None = None
    until: float = 0.0
    seen: dict[str, Seen | None] = field(default_factory=dict)

    def stats(
        self, session: Session, uuids: list[str], *, since: float, now: float,
        last_run: float | None, threshold: float,
    ) -> dict[str, Seen]:  # fmt: skip
        """uuid -> (first ts, last ts, newest busy ts) of each held GPU's utilization samples."""
        bind, store = session.get_bind().engine, samples.store()
        key = (str(bind.url), id(bind), id(store))
        if (self.key, self.until) != (key, last_run) or now < self.until:
            self.seen = {}
        new = [u for u in uuids if u not in self.seen]
        old = [u for u in uuids if u in self.seen]
        got: dict[str, Seen | None] = dict.fromkeys(new)  # None: no sample yet, none to re-read
        got.update(
            {u: st[:3] for u, st in _window_stats(session, new, since, now, threshold).items()}
        )
        span = max(since, self.until - LATE_S)
        got.update(self._warm(session, old, since=span, now=now, threshold=threshold))
        self.seen, self.key, self.until = got, key, now
        return {u: st for u, st in got.items() if st is not None}

    def _warm(
        self, session: Session, uuids: list[str], *, since: float, now: float, threshold: float
    ) -> dict[str, Seen | None]:
        """What GPUs already tracked showed since `since`: each one's newest row and newest
        busy sample (four fleet-wide reads of one value per GPU on VictoriaMetrics, where the
        window's statistics take eleven); a GPU's first sample, or a row newer than `now` (a
        replay), reads that GPU's window."""
        if not uuids:
            return {}
        store = samples.store()
        rows = store.newest(session, uuids=uuids, since=since, until=now, fields=[])
        exact = {u for u, r in rows.items() if r["ts"] > now or self.seen[u] is None}
        busy = store.last_above(
            session, uuids=uuids, field="util_gpu", threshold=threshold, since=since, until=now
        )
        recent = _window_stats(session, sorted(exact), since, now, threshold)
        out = {}
        for u in uuids:
            before = self.seen[u]
            if before is None or u in exact or u not in rows:
                out[u] = _merge(before, recent.get(u))
            else:
                newest_busy = max(before[2] or 0.0, busy.get(u, 0.0)) or None
                out[u] = (before[0], max(before[1], rows[u]["ts"]), newest_busy)
        return out


def _merge(before: Seen | None, recent: Any) -> Seen | None:
    if recent is None:
        return before
    if before is None:
        return recent[:3]
    busy = max((b for b in (before[2], recent[2]) if b is not None), default=None)
    return (min(before[0], recent[0]), max(before[1], recent[1]), busy)


TRACKER = IdleTracker()


def _peaks(session: Session, spans: dict[str, tuple[float, float]]) -> dict[str, float | None]:
    """uuid -> highest utilization over (since, until]: read only for findings being opened,
    grouped by start (a job's GPUs share one)."""
    by_since: dict[float, list[str]] = {}
    for uuid, (since, _) in spans.items():
        by_since.setdefault(since, []).append(uuid)
    out: dict[str, float | None] = {}
    store = samples.store()
    for since, uuids in by_since.items():
        until = max(spans[u][1] for u in uuids)
        got = store.window_stats(
            session, uuids=uuids, since=since + 1e-3, until=until, fields=["util_gpu"]
        )
        out.update({u: w.fields["util_gpu"].max for u, w in got.items()})
    return out


def _account(finding: IdleFinding, *, end: float, cost_per_hour: float) -> None:
    finding.gpu_hours = round(max(end - finding.idle_since_ts, 0.0) / 3600.0, 6)
    finding.cost = round(finding.gpu_hours * cost_per_hour, 4)


def detect(
    session: Session,
    *,
    settings: Settings,
    now: float,
    last_run: float | None,
    later: list[Callable[[], None]],
) -> tuple[int, int]:
    """Open, extend and resolve idle findings; returns (opened, resolved). `last_run`: when the
    previous pass ran (the stored state), so a warm tracker may read only what came since.
    The findings' write goes into `later`, which the caller runs once every read is done."""
    threshold, price = settings.idle_util_threshold, settings.idle_cost_per_gpu_hour
    held = _allocated_gpus(session, now)
    since = now - window_s(settings)
    uuids = sorted({u for _, u in held})
    stats = TRACKER.stats(
        session, uuids, since=since, now=now, last_run=last_run, threshold=threshold
    )
    findings = {(f.job_id, f.gpu_uuid): f for f in service.open_idle_findings(session)}
    changed, resolved = [], 0
    for key, f in findings.items():
        st = stats.get(key[1])
        if key not in held:
            why, end = "the allocation ended", f.last_seen_ts
        elif st is not None and st[2] is not None and st[2] > f.last_seen_ts:
            why, end = "the GPU is busy again", st[2]
        else:
            if st is not None:
                f.last_seen_ts = max(f.last_seen_ts, st[1])
            _account(f, end=f.last_seen_ts, cost_per_hour=price)
            changed.append(f)
            continue
        f.state, f.resolved_ts, f.resolution = IncidentState.RESOLVED, end, why
        _account(f, end=f.last_seen_ts, cost_per_hour=price)
        changed.append(f)
        resolved += 1
    new = _open(session, held, findings, stats, settings=settings, now=now)
    later.append(lambda: service.save_idle_findings(session, findings=changed + new, now=now))
    return len(new), resolved


def _open(
    session: Session,
    held: dict[tuple[str, str], dict[str, Any]],
    findings: dict[tuple[str, str], IdleFinding],
    stats: dict[str, Seen],
    *,
    settings: Settings,
    now: float,
) -> list[IdleFinding]:
    """New findings: held GPUs whose fresh samples have been idle for the minimum duration."""
    fresh_s = max(3 * settings.idle_interval_s, 300.0)
    spans = {}
    for key, a in held.items():
        st = stats.get(key[1])
        if key in findings or st is None or now - st[1] > fresh_s:
            continue
        idle_since = max(st[0], a["start_ts"], st[2] or 0.0)
        if st[1] - idle_since >= settings.idle_min_duration_s:
            spans[key] = (idle_since, st[1])
    peaks = _peaks(session, {k[1]: span for k, span in spans.items()})
    out = []
    for key, (idle_since, last) in spans.items():
        a = held[key]
        f = IdleFinding(
            scheduler=a["scheduler"], job_id=a["job_id"], user=a["user"], account=a["account"],
            node=a["node"], gpu_uuid=key[1], gpu_index=a["index"], pci_bus_id=a["pci"],
            idle_since_ts=idle_since, last_seen_ts=last, max_util=peaks.get(key[1]),
        )  # fmt: skip
        _account(f, end=last, cost_per_hour=settings.idle_cost_per_gpu_hour)
        out.append(f)
    return out
