"""Prometheus metrics of the server: ingest counters and every source's health counters.

The registry is passed in (never the global one); web.fleetmetrics adds the store's families.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from collector.health import all_health
from timeline.models import AppendResult


class _SourceHealthCollector(Collector):
    def collect(self) -> Iterator[CounterMetricFamily]:
        parse = CounterMetricFamily(
            "fleetmedic_source_parse_failures",
            "Lines or records a source could not parse",
            labels=["source", "reason"],
        )
        errors = CounterMetricFamily(
            "fleetmedic_source_errors", "Failed reads of a source", labels=["source", "reason"]
        )
        for health in all_health():
            for reason, n in health.parse_failures.items():
                parse.add_metric([health.source, reason], n)
            for reason, n in health.errors.items():
                errors.add_metric([health.source, reason], n)
        yield parse
        yield errors


class ServerMetrics:
    """One registry per app, so tests can build many apps in one process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.batches = Counter(
            "fleetmedic_ingest_batches", "Batches received", ["result"], registry=self.registry
        )
        self.samples = Counter(
            "fleetmedic_ingest_samples", "GPU samples stored", registry=self.registry
        )
        self.events = Counter("fleetmedic_ingest_events", "Events stored", registry=self.registry)
        self.registry.register(_SourceHealthCollector())

    def observe_ingest(self, result: AppendResult) -> None:
        """Count one ingest outcome."""
        self.batches.labels("duplicate" if result.duplicate else "stored").inc()
        self.samples.inc(result.samples)
        self.events.inc(result.events)
