"""DCGM source: scrapes a dcgm-exporter /metrics endpoint into samples, events and allocations.

Samples carry the mapped DCGM_FI_DEV_* fields (profiling and other fields go to Sample.extra).
Events come from changes between scrapes: a new last-Xid value, a rise in the exporter's
per-Xid window count, ECC / row-remap / NVLink error counters going up. On the first scrape
(nothing to compare with) only what the scrape states on its own becomes an event (a non-zero
last Xid, a row-remap failure or pending remap, volatile DBEs), marked `snapshot`. Pod,
namespace and container labels (and `hpc_job` from dcgm-exporter's HPC job mapping) become
allocations of that GPU. HTTP errors, timeouts and bad exposition lines are counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from collector.base import Observations
from collector.health import SourceHealth, http_ok
from collector.parse.dcgm import (
    GpuScrape,
    dcgm_event,
    group_by_gpu,
    parse_exposition,
    snapshot_events,
    to_gpu_info,
    to_sample,
    workload_job_id,
)
from timeline.models import Allocation, Event, EventKind, Scheduler, Severity

# Counters whose rise is an event: sample field -> (kind, severity, payload facts).
_RISES: dict[str, tuple[EventKind, Severity, dict[str, Any]]] = {
    "ecc_dbe_volatile": (EventKind.ECC, Severity.ERROR, {"ecc": "dbe", "scope": "volatile"}),
    "ecc_dbe_aggregate": (EventKind.ECC, Severity.ERROR, {"ecc": "dbe", "scope": "aggregate"}),
    "ecc_sbe_volatile": (EventKind.ECC, Severity.WARNING, {"ecc": "sbe", "scope": "volatile"}),
    "ecc_sbe_aggregate": (EventKind.ECC, Severity.WARNING, {"ecc": "sbe", "scope": "aggregate"}),
    "remapped_uncorrectable": (EventKind.ROW_REMAP, Severity.ERROR, {"rows": "uncorrectable"}),
    "remapped_correctable": (EventKind.ROW_REMAP, Severity.WARNING, {"rows": "correctable"}),
    "nvlink_crc_errors": (EventKind.NVLINK, Severity.WARNING, {"counter": "crc"}),
    "nvlink_replay_errors": (EventKind.NVLINK, Severity.WARNING, {"counter": "replay"}),
    "nvlink_recovery_errors": (EventKind.NVLINK, Severity.ERROR, {"counter": "recovery"}),
}
_FLAGS = ("remap_failure", "remap_pending")


class DcgmSource:
    """Polled source over one dcgm-exporter endpoint; the HTTP client is injected."""

    name = "dcgm"

    def __init__(
        self,
        *,
        node: str,
        client: httpx.Client,
        url: str = "http://127.0.0.1:9400/metrics",
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        health: SourceHealth | None = None,
    ) -> None:
        self.node, self.client, self.url, self.timeout_s, self.clock = (
            node,
            client,
            url,
            timeout_s,
            clock,
        )
        self.health = health or SourceHealth("dcgm")
        self._prev: dict[str, GpuScrape] = {}
        self.scrapes = 0

    def collect(self) -> Observations:
        """Scrape once; an unreachable or failing exporter gives empty observations, counted."""
        text = self._fetch()
        if text is None:
            return Observations()
        return self.observe(text, ts=self.clock())

    def observe(self, text: str, *, ts: float) -> Observations:
        """Turn one scrape's text into observations, comparing with the previous scrape."""
        rows = parse_exposition(
            text, on_bad_line=lambda line: self.health.parse_failure("exposition_line", line)
        )
        gpus = group_by_gpu(rows)
        if rows and not gpus:
            self.health.parse_failure("no_gpu_rows", text[:200])
        return self.observe_gpus(gpus, ts=ts)

    def observe_gpus(self, gpus: dict[str, GpuScrape], *, ts: float) -> Observations:
        """Observations from already grouped per-GPU values (a scrape, or a Prometheus query)."""
        obs = Observations()
        for uuid, g in gpus.items():
            obs.gpus.append(to_gpu_info(g, self.node))
            obs.samples.append(to_sample(g, ts))
            prev = self._prev.get(uuid)
            if prev is None:
                events = snapshot_events(g, node=self.node, ts=ts)
                for e in events:
                    e.payload["snapshot"] = True
            else:
                events = self._changes(prev, g, ts)
            obs.events += events
            obs.allocations += self._allocations(g, ts)
        self._prev = gpus
        self.scrapes += 1
        return obs

    # --- internals --------------------------------------------------------------------------

    def _fetch(self) -> str | None:
        resp = http_ok(self.health, lambda: self.client.get(self.url, timeout=self.timeout_s))
        return None if resp is None else resp.text

    def _changes(self, prev: GpuScrape, g: GpuScrape, ts: float) -> list[Event]:
        out: list[Event] = []
        kw: dict[str, Any] = {"node": self.node, "ts": ts}
        if g.xid_last and g.xid_last != prev.xid_last:
            msg = f"DCGM reports Xid {g.xid_last}" + (f": {g.xid_msg}" if g.xid_msg else "")
            out.append(
                dcgm_event(
                    g,
                    kind=EventKind.XID,
                    severity=Severity.ERROR,
                    message=msg,
                    code=g.xid_last,
                    payload={"xid": g.xid_last, "err_msg": g.xid_msg, "previous": prev.xid_last},
                    **kw,
                )
            )
        for xid, count in g.xid_counts.items():
            rise = count - prev.xid_counts.get(xid, 0.0)
            if rise > 0:
                out.append(
                    dcgm_event(
                        g,
                        kind=EventKind.XID,
                        severity=Severity.ERROR,
                        message=f"DCGM counted {int(rise)} new Xid {xid}",
                        code=xid,
                        payload={"xid": xid, "window_count": count},
                        **kw,
                    )
                )
                out[-1].count = max(1, int(rise))
        for name, (kind, sev, facts) in _RISES.items():
            before, now = prev.fields.get(name), g.fields.get(name)
            if before is not None and now is not None and now > before:
                payload = {**facts, "field": name, "value": int(now), "delta": int(now - before)}
                out.append(
                    dcgm_event(
                        g,
                        kind=kind,
                        severity=sev,
                        payload=payload,
                        message=f"{name} rose by {int(now - before)} to {int(now)}",
                        **kw,
                    )
                )
        for flag in _FLAGS:
            if g.fields.get(flag) and not prev.fields.get(flag):
                sev = Severity.CRITICAL if flag == "remap_failure" else Severity.WARNING
                out.append(
                    dcgm_event(
                        g,
                        kind=EventKind.ROW_REMAP,
                        severity=sev,
                        message=f"DCGM reports {flag.replace('_', ' ')}",
                        payload={flag: True},
                        **kw,
                    )
                )
        return out

    def _allocations(self, g: GpuScrape, ts: float) -> list[Allocation]:
        out: list[Allocation] = []
        for work in g.workloads:
            job = workload_job_id(work)
            if job is None:
                continue
            # Kubernetes ids are namespace/pod; a Slurm job id never holds a slash.
            scheduler = Scheduler.KUBERNETES if "/" in job else Scheduler.SLURM
            out.append(
                Allocation(
                    scheduler=scheduler,
                    job_id=job,
                    node=self.node,
                    gpu_index=g.index,
                    gpu_uuid=g.uuid,
                    start_ts=ts,
                )
            )
        return out
