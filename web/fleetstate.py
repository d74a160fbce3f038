"""The classified fleet as the pages, the API and /metrics share it.

Failing comes from the correlator's open incidents (correlator.service.failing_set); the
timeline only joins it with telemetry and allocations.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field

import orjson
from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from timeline import db, fleet, fleet_cells
from timeline.fleet import NAME, Classified, GpuRow, GpuState, NodeView
from timeline.fleet_cells import JobRow, NodeCells
from timeline.history import Holder
from timeline.settings import Settings
from web.fleetgrid import STATE_CODES, Grid, build_grid, grid_from_cells, options_from_cells

log = logging.getLogger(__name__)
__all__ = ["STATE_CODES", "FleetCache", "FleetFilter", "FleetSnapshot", "filter_options"]


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


Cells = tuple[list[NodeCells], dict[int, JobRow], list[str]]


def classified_cells(
    session: Session, *, settings: Settings, now: float, side: sessionmaker[Session] | None
) -> Cells:
    """Every node's GPUs classified by PostgreSQL (timeline.fleet_cells), the jobs holding
    them, and the GPU models; holders read on a connection of `side` meanwhile, if given."""
    return fleet_cells.node_cells(
        session,
        now=now,
        failing=incidents.failing_set(session),
        idle_threshold=settings.idle_util_threshold,
        stale_after_s=fleet.STALE_AFTER_S,
        side=side,
    )


Rows = tuple[dict[str, NodeView], list[Classified]]


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

    def keeps(self, row: GpuRow, alloc: Holder | None) -> bool:
        """True when the GPU (its newest row and holder) passes every set filter."""
        if alloc is None and (self.partition or self.user or self.account):
            return False
        return (
            (not self.partition or (alloc is not None and alloc.partition == self.partition))
            and (not self.user or (alloc is not None and alloc.user == self.user))
            and (not self.account or (alloc is not None and alloc.account == self.account))
            and (not self.model or row[NAME] == self.model)
        )


def filter_options(gpus: list[Classified]) -> dict[str, list[str]]:
    """The values each filter can take, from the unfiltered fleet."""
    # A holder is one object shared by the GPUs it holds: dedupe by identity (hashing 10k
    # tuples of strings cost more than the rest), then by value.
    allocs = list({id(a): a for _, a, _, _ in gpus if a is not None}.values())
    return {
        "partitions": sorted({a.partition for a in allocs if a.partition}),
        "users": sorted({a.user for a in allocs if a.user}),
        "accounts": sorted({a.account for a in allocs if a.account}),
        "models": sorted({r[NAME] for r, _, _, _ in gpus} - {None, ""}),
    }


def _nodes_json(views: list[NodeView], budget: int) -> tuple[bytes, int]:
    parts: list[bytes] = []
    total = 0
    for i, view in enumerate(views):
        part = orjson.dumps(view)
        total += len(part)
        if total > budget:
            return b"[" + b",".join(parts) + b"]", len(views) - i
        parts.append(part)
    return b"[" + b",".join(parts) + b"]", 0


@dataclass
class FleetSnapshot:
    """One classification of the fleet and what the pages derive from it, each derived value
    built at most once per snapshot (so a cached snapshot serves the page cheaply).

    Built either from per-GPU rows (Python's classification: SQLite, and what the API and the
    filters need) or from per-node cells (PostgreSQL's: the unfiltered page at 100k GPUs);
    a snapshot of cells gets its rows on first need, from the session then at hand.
    """

    rows: Rows | None
    built: float = 0.0  # time.monotonic() when classified
    cells: Cells | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _grid: Grid | None = None
    _options: dict[str, list[str]] | None = None
    _api: tuple[int, bytes, int] | None = None

    def grid(self) -> Grid:
        """The unfiltered grid (payload serialized once, on first use)."""
        with self.lock:
            if self._grid is None:
                if self.cells is not None:
                    self._grid = grid_from_cells(*self.cells[:2])
                else:
                    assert self.rows is not None
                    self._grid = build_grid(*self.rows)
                self._grid.script_json()
            return self._grid

    def counts(self) -> dict[GpuState, int]:
        """GPUs by state."""
        return self.grid().counts

    def options(self) -> dict[str, list[str]]:
        """The values each filter can take."""
        with self.lock:
            if self._options is None:
                if self.cells is not None:
                    self._options = options_from_cells(*self.cells[1:])
                else:
                    assert self.rows is not None
                    self._options = filter_options(self.rows[1])
            return self._options

    def ensure_rows(self, session: Session, *, settings: Settings, now: float) -> Rows:
        """The per-GPU rows, classified now if this snapshot was built from cells."""
        rows = self.rows
        if rows is None:
            # Outside the lock: at 100k GPUs this takes a second or more, and the page's
            # grid (same lock) must not wait for it.
            made = classified_rows(session, settings=settings, now=now)
            with self.lock:
                if self.rows is None:
                    self.rows = made
                rows = self.rows
        return rows

    def api_body(self, budget: int) -> tuple[bytes, int]:
        """/api/v1/fleet's JSON: the leading nodes that fit `budget` bytes, and how many were
        left out (each node serialized once; the answer is kept for the snapshot's life)."""
        with self.lock:
            if self._api is None or self._api[0] != budget:
                assert self.rows is not None, "ensure_rows first"
                self._api = (budget, *_nodes_json(fleet.views_of(*self.rows), budget))
            return self._api[1], self._api[2]

    def filtered_grid(self, flt: FleetFilter) -> Grid:
        """The grid of the GPUs that pass `flt` (built per request: filters vary)."""
        if not flt.active():
            return self.grid()
        assert self.rows is not None, "ensure_rows first"
        return build_grid(*self.rows, keep=flt.keeps)


class FleetCache:
    """The classified fleet, shared by every page view, API call and scrape for `ttl_s`.

    Telemetry arrives every ~10 s, so a few seconds of reuse changes nothing a person sees,
    while many viewers and scrapers no longer multiply the cost of classifying 10k+ GPUs.
    With a session factory, a snapshot past its ttl is still served while one background
    thread builds the next (at 100k GPUs a build takes seconds: no request waits for it);
    past `STALE_LIMIT` ttls it is rebuilt in the caller. A ttl of 0 turns it off. With
    `cells` (PostgreSQL), a snapshot is classified by the database per node, and per-GPU rows
    are made only for the callers that need them (the API, filters, per-GPU metrics).
    """

    STALE_LIMIT = 3.0

    def __init__(
        self, ttl_s: float, factory: sessionmaker[Session] | None = None, *, cells: bool = False
    ) -> None:
        self.ttl_s = ttl_s
        self.factory = factory
        self.cells = cells
        self.lock = threading.Lock()
        self.value: FleetSnapshot | None = None
        self.refreshing = False

    def _build(self, session: Session, settings: Settings, now: float) -> FleetSnapshot:
        if self.cells:
            made = classified_cells(session, settings=settings, now=now, side=self.factory)
            return FleetSnapshot(None, time.monotonic(), cells=made)
        return FleetSnapshot(classified_rows(session, settings=settings, now=now), time.monotonic())

    def snapshot(
        self, session: Session, *, settings: Settings, now: float, rows: bool = False
    ) -> FleetSnapshot:
        """The classified fleet, rebuilt when older than the ttl (one builder at a time);
        with `rows`, its per-GPU rows are there too."""
        snap = self._current(session, settings, now)
        if rows:
            snap.ensure_rows(session, settings=settings, now=now)
        return snap

    def _current(self, session: Session, settings: Settings, now: float) -> FleetSnapshot:
        if self.ttl_s <= 0:
            return self._build(session, settings, now)
        with self.lock:  # concurrent misses wait for one rebuild instead of each doing it
            value = self.value
            age = math.inf if value is None else time.monotonic() - value.built
            if value is not None and age < self.ttl_s:
                return value
            if (
                value is not None
                and self.factory is not None
                and age < self.ttl_s * self.STALE_LIMIT
            ):
                if not self.refreshing:
                    self.refreshing = True
                    threading.Thread(
                        target=self._refresh,
                        args=(settings, value.rows is not None),
                        name="fleet-cache",
                        daemon=True,
                    ).start()
                return value
            # Stamped when built: a build slower than the ttl is still reused for a ttl.
            self.value = self._build(session, settings, now)
            return self.value

    def _refresh(self, settings: Settings, with_rows: bool) -> None:
        assert self.factory is not None
        try:
            with db.reading(self.factory) as session:
                now = time.time()
                snap = self._build(session, settings, now)
                if with_rows:  # rows were asked of the last one: have them ready again
                    snap.ensure_rows(session, settings=settings, now=now)
            snap.grid()  # the page's payload too, so that no request builds it
            snap.built = time.monotonic()
            with self.lock:
                self.value = snap
        except Exception:  # the next request past the ttl tries again; the page keeps working
            log.exception("fleet cache refresh failed")
        finally:
            with self.lock:
                self.refreshing = False

    def rows(self, session: Session, *, settings: Settings, now: float) -> Rows:
        """The classified rows (nodes, GPUs) of the current snapshot."""
        found = self.snapshot(session, settings=settings, now=now, rows=True).rows
        assert found is not None
        return found
