"""The fleet heatmap's data: nodes x time, mean GPU utilization, hover = jobs and users.

The page loads it after it renders, so the fleet page itself stays small and fast; the answer
is cached for a short while because every open page asks for the same thing.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy.orm import Session

from timeline import history
from web.api.read import read_session
from web.auth import require_reader
from web.pages.templating import plot_text

router = APIRouter(prefix="/api/v1", tags=["read"], dependencies=[Depends(require_reader)])
_CACHE_S = 30.0
_BUCKETS = 60


def heatmap(session: Session, *, hours: float, now: float) -> dict[str, Any]:
    """Nodes x time buckets of mean utilization, with the jobs running there in each bucket."""
    bucket_s = max(int(hours * 3600 / _BUCKETS), 10)
    start = (int(now - hours * 3600) // bucket_s) * bucket_s
    times = [float(start + i * bucket_s) for i in range(int((now - start) // bucket_s) + 1)]
    col = {ts: i for i, ts in enumerate(times)}
    rows: dict[str, list[float | None]] = defaultdict(lambda: [None] * len(times))
    for node, ts, util in history.node_utilization(
        session, since=start, until=now + 1, bucket_s=bucket_s
    ):
        if ts in col:
            rows[node][col[ts]] = round(util, 1)
    nodes = sorted(rows)
    # Who ran where, as spans per node (a few per node, not one string per cell): the page's
    # script turns them into the hover text of each cell.
    spans: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for a in history.allocations_between(session, since=start, until=now + 1):
        label = plot_text(f"job {a['job_id']} ({a['user'] or '?'})")  # Plotly reads tags
        span = (a["start_ts"] * 1000, (a["end_ts"] or now + 1) * 1000, label)
        if span not in spans[a["node"]]:
            spans[a["node"]].append(span)
    return {
        "nodes": [plot_text(n) for n in nodes],
        "times": [t * 1000 for t in times],  # JS milliseconds: the browser shows local time
        "z": [rows[n] for n in nodes],
        "spans": [spans.get(n, []) for n in nodes],
        "bucket_ms": bucket_s * 1000,
    }


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.building = threading.Lock()
        self.entries: dict[float, tuple[float, dict[str, Any]]] = {}

    def get(self, key: float, now: float) -> dict[str, Any] | None:
        with self.lock:
            hit = self.entries.get(key)
        return hit[1] if hit is not None and now - hit[0] < _CACHE_S else None

    def put(self, key: float, now: float, value: dict[str, Any]) -> None:
        with self.lock:
            self.entries[key] = (now, value)

    def get_or_build(
        self, key: float, now: float, build: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """The cached answer, or one built now; concurrent misses wait for one build (each
        open fleet page asks at once, and a cold build reads an hour of samples)."""
        with self.building:
            hit = self.get(key, now)
            if hit is None:
                hit = build()
                self.put(key, now, hit)
            return hit


def _cache_of(request: Request) -> _Cache:
    cache = getattr(request.app.state, "heatmap_cache", None)
    if cache is None:  # one per app: tests build many apps in one process
        cache = request.app.state.heatmap_cache = _Cache()
    return cache


@router.get("/fleet/heatmap")
async def fleet_heatmap(
    request: Request, hours: float = Query(1.0, gt=0, le=24, allow_inf_nan=False)
) -> dict[str, Any]:
    """Utilization of every node over the last `hours` (at most 24: longer reads rollups)."""
    now = time.time()
    cache = _cache_of(request)
    hit = cache.get(hours, now)
    if hit is not None:
        return hit
    return await read_session(
        request, lambda s: cache.get_or_build(hours, now, lambda: heatmap(s, hours=hours, now=now))
    )
