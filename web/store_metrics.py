"""/metrics: bytes on disk per store table, read at most every `ttl_s` (sizing a large SQLite
file with dbstat reads every page, so a scrape must not pay it each time)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

from timeline import rollups

log = logging.getLogger(__name__)


class TableBytesCollector(Collector):
    """fleetmedic_table_bytes{table}: PostgreSQL pg_total_relation_size, SQLite dbstat."""

    def __init__(self, factory: sessionmaker[Session], ttl_s: float = 300.0) -> None:
        self.factory = factory
        self.ttl_s = ttl_s
        self._sizes: dict[str, int] = {}
        self._at = float("-inf")
        self._lock = threading.Lock()

    def _read(self) -> dict[str, int]:
        with self._lock:
            if time.monotonic() - self._at >= self.ttl_s:
                try:
                    with self.factory() as session:
                        self._sizes = rollups.table_bytes(session)
                except Exception:  # a scrape must answer even when the store cannot
                    log.exception("could not read table sizes")
                self._at = time.monotonic()
            return dict(self._sizes)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The newest table sizes."""
        family = GaugeMetricFamily(
            "fleetmedic_table_bytes", "Bytes on disk per store table, indexes included",
            labels=["table"],
        )  # fmt: skip
        for name, size in sorted(self._read().items()):
            family.add_metric([name], size)
        yield family
