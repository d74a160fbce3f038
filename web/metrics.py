"""Prometheus metrics of the server: ingest counters and every source's health counters.

The registry is passed in (never the global one); web.fleetmetrics adds the store's families.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from collector.health import all_health
from timeline.group_commit import GroupWriter
from timeline.models import AppendResult
from web.leader import LeaseElector


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


class _LeaderCollector(Collector):
    def __init__(self, elector: LeaseElector) -> None:
        self.elector = elector

    def collect(self) -> Iterator[GaugeMetricFamily]:
        epoch = self.elector.epoch
        yield GaugeMetricFamily(
            "fleetmedic_leader",
            "1 while this server process holds the leader lease and runs the periodic work",
            value=0 if epoch is None else 1,
        )
        yield GaugeMetricFamily(
            "fleetmedic_leader_epoch",
            "The lease epoch this process leads (0 while it does not)",
            value=epoch or 0,
        )


class GroupCommitCollector(Collector):
    """fleetmedic_ingest_group_{transactions,batches}_total: what the group writer stored."""

    def __init__(self, writer: GroupWriter) -> None:
        self.writer = writer

    def collect(self) -> Iterator[CounterMetricFamily]:
        """Its transactions and the batches in them (their ratio: the mean group size)."""
        yield CounterMetricFamily(
            "fleetmedic_ingest_group_transactions",
            "Transactions of the ingest's group commit (each stores one or more agent batches)",
            value=self.writer.transactions,
        )
        yield CounterMetricFamily(
            "fleetmedic_ingest_group_batches",
            "Agent batches stored by the ingest's group commit",
            value=self.writer.batches,
        )


class ServerMetrics:
    """One registry per app, so tests can build many apps in one process."""

    def __init__(
        self, elector: LeaseElector | None = None, *, registry: CollectorRegistry | None = None
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.batches = Counter(
            "fleetmedic_ingest_batches", "Batches received", ["result"], registry=self.registry
        )
        self.samples = Counter(
            "fleetmedic_ingest_samples", "GPU samples stored", registry=self.registry
        )
        self.events = Counter("fleetmedic_ingest_events", "Events stored", registry=self.registry)
        self.rejected = Counter(
            "fleetmedic_ingest_rejected_items",
            "Items left out of stored batches (422: broke the contract, 403: another node's)",
            ["kind", "status"],
            registry=self.registry,
        )
        self.unavailable = Counter(
            "fleetmedic_store_unavailable",
            "Requests answered 503 because the database could not take the work",
            ["reason"],
            registry=self.registry,
        )
        self.registry.register(_SourceHealthCollector())
        if elector is not None:
            self.registry.register(_LeaderCollector(elector))

    def observe_ingest(self, result: AppendResult) -> None:
        """Count one ingest outcome."""
        self.batches.labels("duplicate" if result.duplicate else "stored").inc()
        self.samples.inc(result.samples)
        self.events.inc(result.events)
        if not result.duplicate:
            for item in result.rejected:
                self.rejected.labels(item.kind, str(item.status)).inc()

    def observe_conflict(self) -> None:
        """Count a batch refused because its batch_id was stored with other content."""
        self.batches.labels("conflict").inc()
