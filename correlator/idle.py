"""Idle-GPU findings: allocated GPUs doing nothing, with GPU-hours and cost wasted."""

from __future__ import annotations

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


def _account(finding: IdleFinding, *, end: float, cost_per_hour: float) -> None:
    finding.gpu_hours = round(max(end - finding.idle_since_ts, 0.0) / 3600.0, 6)
    finding.cost = round(finding.gpu_hours * cost_per_hour, 4)


def detect(session: Session, *, settings: Settings, now: float) -> tuple[int, int]:
    """Open, extend and resolve idle findings; returns (opened, resolved)."""
    threshold, need = settings.idle_util_threshold, settings.idle_min_duration_s
    price = settings.idle_cost_per_gpu_hour
    held = _allocated_gpus(session, now)
    since = now - need - 2 * settings.idle_interval_s - 60.0
    stats = (
        _window_stats(session, sorted({u for _, u in held}), since, now, threshold) if held else {}
    )
    findings = {(f.job_id, f.gpu_uuid): f for f in service.open_idle_findings(session)}
    fresh_s = max(3 * settings.idle_interval_s, 300.0)
    changed, opened, resolved = [], 0, 0
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
    for key, a in held.items():
        st = stats.get(key[1])
        if key in findings or st is None or now - st[1] > fresh_s:
            continue
        idle_since = max(st[0], a["start_ts"], st[2] or 0.0)
        if st[1] - idle_since < need:
            continue
        f = IdleFinding(
            scheduler=a["scheduler"], job_id=a["job_id"], user=a["user"], account=a["account"],
            node=a["node"], gpu_uuid=key[1], gpu_index=a["index"], pci_bus_id=a["pci"],
            idle_since_ts=idle_since, last_seen_ts=st[1], max_util=st[3],
        )  # fmt: skip
        _account(f, end=st[1], cost_per_hour=price)
        changed.append(f)
        opened += 1
    service.save_idle_findings(session, findings=changed, now=now)
    return opened, resolved
