"""The healer on /metrics: breaker state, nodes kept out, actions by kind and outcome.

Read from the store at each scrape, so every server process reports the same figures and a
restart loses nothing. Ended actions never change again, which makes their count a counter.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

from healer import service
from healer.models import TERMINAL

_ENDED = {s.value for s in TERMINAL}


class HealerCollector(Collector):
    """fleetmedic_healer_* metrics from the healer's tables."""

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self.factory = factory

    def collect(self) -> Iterator[Metric]:
        """One scrape: three small queries."""
        with self.factory() as s:
            breaker = service.get_breaker(s)
            held = service.held_nodes(s)
            counts = service.action_counts(s)
        tripped = GaugeMetricFamily(
            "fleetmedic_healer_breaker_tripped",
            "1 while the blast-radius breaker is tripped (new drains stop until an admin resets)",
        )
        tripped.add_metric([], 1.0 if breaker.tripped else 0.0)
        yield tripped
        out = GaugeMetricFamily(
            "fleetmedic_healer_nodes_kept_out",
            "Nodes the healer took out and still holds",
            labels=["support"],
        )
        out.add_metric(["yes"], float(sum(1 for h in held if h.support)))
        out.add_metric(["no"], float(sum(1 for h in held if not h.support)))
        yield out
        ended = CounterMetricFamily(
            "fleetmedic_healer_actions",
            "Healer actions that ended, by kind and result (done, failed, cancelled)",
            labels=["action", "result"],
        )
        pending = GaugeMetricFamily(
            "fleetmedic_healer_actions_pending",
            "Healer actions not ended yet, by kind and state (planned, approved, running)",
            labels=["action", "state"],
        )
        for c in counts:
            (ended if c.result in _ENDED else pending).add_metric([c.action, c.result], c.count)
        yield ended
        yield pending
