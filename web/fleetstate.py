"""The classified fleet as the pages, the API and /metrics share it.

Failing comes from the correlator's open incidents (correlator.service.failing_set); the
timeline only joins it with telemetry and allocations.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from correlator import service as incidents
from timeline import fleet
from timeline.fleet import Classified, GpuState, NodeView
from timeline.history import Holder
from timeline.settings import Settings

STATE_CODES = {
    GpuState.BUSY: "b",
    GpuState.IDLE_ALLOCATED: "i",
    GpuState.FREE: "f",
    GpuState.FAILING: "x",
    GpuState.STALE: "s",
}


def classified_rows(
    session: Session, *, settings: Settings, now: float
) -> tuple[dict[str, NodeView], list[Classified]]:
    """Every node and GPU classified, failing from open incidents that blame them (rows:
    the grid and /metrics need no view object per GPU)."""
    return fleet.classify_all(
        session,
        now=now,
        failing=incidents.failing_set(session),
        idle_threshold=settings.idle_util_threshold,
    )


@dataclass
class FleetFilter:
    """The fleet page's filters; empty means any."""

    partition: str = ""
    user: str = ""
    account: str = ""
    model: str = ""

    def active(self) -> bool:
        """True when any filter is set."""
        return any((self.partition, self.user, self.account, self.model))

    def keeps(self, row: dict[str, Any], alloc: Holder | None) -> bool:
        """True when the GPU (its newest row and holder) passes every set filter."""
        if alloc is None and (self.partition or self.user or self.account):
            return False
        return (
            (not self.partition or (alloc is not None and alloc.partition == self.partition))
            and (not self.user or (alloc is not None and alloc.user == self.user))
            and (not self.account or (alloc is not None and alloc.account == self.account))
            and (not self.model or row.get("name") == self.model)
        )


def filter_options(gpus: list[Classified]) -> dict[str, list[str]]:
    """The values each filter can take, from the unfiltered fleet."""
    allocs = [a for _, a, _, _ in gpus if a is not None]
    return {
        "partitions": sorted({a.partition for a in allocs if a.partition}),
        "users": sorted({a.user for a in allocs if a.user}),
        "accounts": sorted({a.account for a in allocs if a.account}),
        "models": sorted({r["name"] for r, _, _, _ in gpus if r["name"]}),
    }


class FleetCache:
    """The classified fleet, shared by every page view, API call and scrape for `ttl_s`.

    Telemetry arrives every ~10 s, so a few seconds of reuse changes nothing a person sees,
    while many viewers and scrapers no longer multiply the cost of classifying 10k+ GPUs.
    A ttl of 0 turns it off.
    """

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self.lock = threading.Lock()
        self.value: tuple[float, tuple[dict[str, NodeView], list[Classified]]] | None = None

    def rows(
        self, session: Session, *, settings: Settings, now: float
    ) -> tuple[dict[str, NodeView], list[Classified]]:
        """The classified rows, rebuilt when older than the ttl (one builder at a time)."""
        if self.ttl_s <= 0:
            return classified_rows(session, settings=settings, now=now)
        with self.lock:  # concurrent misses wait for one rebuild instead of each doing it
            if self.value is None or time.monotonic() - self.value[0] >= self.ttl_s:
                rows = classified_rows(session, settings=settings, now=now)
                # Stamped when built: a build slower than the ttl is still reused for a ttl.
                self.value = (time.monotonic(), rows)
            return self.value[1]
