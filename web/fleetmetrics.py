"""/metrics families read from the store at scrape time: GPUs by state, idle GPU-hours,
incidents by category, healer actions, notification deliveries.

Bounded cardinality: labels are states, categories, sinks and statuses (small fixed sets); the
per-GPU utilization series exist only when `metrics_per_gpu` opts in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from correlator import tables as ct
from timeline.fleet import INDEX, NODE, UTIL_GPU, GpuState
from timeline.settings import Settings
from web.fleetstate import FleetCache
from web.notify import service as notify

log = logging.getLogger(__name__)


def _incident_families(session: Session) -> list[Metric]:
    total = CounterMetricFamily(
        "fleetmedic_incidents", "Incidents opened, by category", labels=["category"]
    )
    open_now = GaugeMetricFamily(
        "fleetmedic_open_incidents", "Incidents open now, by category", labels=["category"]
    )
    tbl = ct.incidents
    stmt = select(tbl.c.category, tbl.c.state, func.count()).group_by(tbl.c.category, tbl.c.state)
    totals: dict[str, int] = {}
    opens: dict[str, int] = {}
    for category, state, n in session.execute(stmt).all():
        key = category or "unknown"
        totals[key] = totals.get(key, 0) + int(n)
        if state == "open":
            opens[key] = opens.get(key, 0) + int(n)
    for key, n in sorted(totals.items()):
        total.add_metric([key], n)
        open_now.add_metric([key], opens.get(key, 0))
    return [total, open_now]


def _idle_family(session: Session) -> Metric:
    hours = session.execute(select(func.sum(ct.idle_findings.c.gpu_hours))).scalar_one()
    family = CounterMetricFamily(
        "fleetmedic_idle_gpu_hours", "GPU-hours allocated GPUs sat idle (idle findings)"
    )
    family.add_metric([], float(hours or 0.0))
    return family


def _notify_families(session: Session) -> list[Metric]:
    deliveries = GaugeMetricFamily(
        "fleetmedic_notification_deliveries",
        "Alert deliveries by sink and status (pending, sent, failed)",
        labels=["sink", "status"],
    )
    failures = CounterMetricFamily(
        "fleetmedic_notification_failures",
        "Failed delivery attempts by sink (each after its in-pass retries)",
        labels=["sink"],
    )
    by_sink: dict[str, int] = {}
    for sink, status, n, failed in notify.counts(session):
        deliveries.add_metric([sink, status], n)
        by_sink[sink] = by_sink.get(sink, 0) + failed
    for sink, n in sorted(by_sink.items()):
        failures.add_metric([sink], n)
    return [deliveries, failures]


def _state_family(counts: dict[GpuState, int]) -> Metric:
    family = GaugeMetricFamily("fleetmedic_gpus", "GPUs by state", labels=["state"])
    for state, count in counts.items():
        family.add_metric([state.value], count)
    return family


class DashboardCollector(Collector):
    """Reads the store on scrape; a failing read is logged and those families are left out."""

    def __init__(
        self, factory: sessionmaker[Session], settings: Settings, cache: FleetCache
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.cache = cache

    def _gpus(self, session: Session) -> list[Metric]:
        now = time.time()
        if not self.settings.metrics_per_gpu:  # counts only: no per-GPU rows needed
            counts = self.cache.snapshot(session, settings=self.settings, now=now).counts()
            return [_state_family(counts)]
        _, gpus = self.cache.rows(session, settings=self.settings, now=now)
        counts = dict.fromkeys(GpuState, 0)
        for _, _, _, state in gpus:
            counts[state] += 1
        util = GaugeMetricFamily(
            "fleetmedic_gpu_utilization", "Newest GPU utilization", labels=["node", "gpu"]
        )
        for row, _, _, _ in gpus:
            if row[UTIL_GPU] is not None:
                util.add_metric([row[NODE], str(row[INDEX])], row[UTIL_GPU])
        return [_state_family(counts), util]

    def collect(self) -> Iterator[Metric]:
        """Every family, each from its own query."""
        # The healer's families come from web.healer_metrics.HealerCollector.
        parts = (self._gpus, _incident_families, _idle_family, _notify_families)
        with self.factory() as session:
            for part in parts:
                try:
                    found = part(session)
                except Exception:
                    log.exception("metrics: %s failed; left out of this scrape", part.__name__)
                    session.rollback()
                    continue
                yield from found if isinstance(found, list) else [found]
