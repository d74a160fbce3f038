"""The fleet page: header counts, a compact canvas grid by group, filters, and a heatmap."""

from __future__ import annotations

import time
from functools import lru_cache, partial
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from correlator import service as incidents
from timeline.fleet import GpuState, NodeView
from timeline.history import Holder
from web import healerview
from web.auth import Principal
from web.fleetstate import STATE_CODES, FleetCache, FleetFilter, filter_options
from web.pages.common import show
from web.pages.templating import page_viewer

router = APIRouter(include_in_schema=False)

STATE_COLORS = {
    GpuState.BUSY: "#2e7d32",
    GpuState.IDLE_ALLOCATED: "#f9a825",
    GpuState.FREE: "#90a4ae",
    GpuState.FAILING: "#c62828",
    GpuState.STALE: "#5d4037",
}
STATE_LABELS = {
    GpuState.BUSY: "busy",
    GpuState.IDLE_ALLOCATED: "allocated but idle",
    GpuState.FREE: "free",
    GpuState.FAILING: "failing",
    GpuState.STALE: "no telemetry",
}


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


class GridBuilder:
    """The grid as compact arrays the page's canvas script draws (a few bytes per GPU).

    Each node is [name, group index, drained (0 no, 1 by a person, 2 by us), state letters,
    utilizations (-1 unknown), job refs (-1 none), GPU indexes]; jobs are [job id, user].
    """

    def __init__(self, nodes: dict[str, NodeView]) -> None:
        self.nodes = nodes
        self.groups: dict[str, int] = {}
        self.jobs: dict[str, int] = {}
        self.job_rows: list[list[str]] = []
        self.rows: dict[str, list[Any]] = {}
        self.counts = dict.fromkeys(GpuState, 0)

    def add(self, row: dict[str, Any], alloc: Holder | None, state: GpuState) -> None:
        """One classified GPU."""
        name = row["node"]
        entry = self.rows.get(name)
        if entry is None:
            node = self.nodes[name]
            gi = self.groups.setdefault(node.group, len(self.groups))
            drained = 2 if node.drained_by_us else 1 if node.drained else 0
            entry = self.rows[name] = [name, gi, drained, [], [], [], []]
        ref = -1
        if alloc is not None:
            ref = self.jobs.get(alloc.job_id, -1)
            if ref < 0:
                ref = self.jobs[alloc.job_id] = len(self.job_rows)
                self.job_rows.append([alloc.job_id, alloc.user or ""])
        util = row.get("util_gpu")
        entry[3].append(STATE_CODES[state])
        entry[4].append(-1 if util is None else round(util))
        entry[5].append(ref)
        entry[6].append(row["index"] if row["index"] is not None else len(entry[6]))
        self.counts[state] += 1

    def payload(self) -> dict[str, Any]:
        """The JSON the page embeds, nodes by name."""
        nodes = [self.rows[n] for n in sorted(self.rows)]
        for entry in nodes:
            entry[3] = "".join(entry[3])
        return {
            "groups": list(self.groups),
            "nodes": nodes,
            "jobs": self.job_rows,
            "colors": {STATE_CODES[s]: c for s, c in STATE_COLORS.items()},
            "labels": {STATE_CODES[s]: lbl for s, lbl in STATE_LABELS.items()},
        }


def _header(grid: GridBuilder, session: Any) -> dict[str, Any]:
    drained_ours = sum(1 for e in grid.rows.values() if e[2] == 2)
    drained_people = sum(1 for e in grid.rows.values() if e[2] == 1)
    counts = grid.counts
    header: dict[str, Any] = {
        "total": sum(counts.values()),
        "states": [(s, STATE_LABELS[s], STATE_COLORS[s], counts[s]) for s in GpuState],
        "drained_ours": drained_ours,
        "drained_people": drained_people,
    }
    header["breaker"] = healerview.breaker_label(session)
    live = healerview.list_actions(session, state=["approved", "running"], limit=5000)
    header["in_remediation"] = len({a.node for a in live if a.node})
    return header


def fleet_data(
    session: Any, *, settings: Any, flt: FleetFilter, now: float, cache: FleetCache | None = None
) -> dict[str, Any]:
    """Everything the fleet page shows."""
    cache = cache or FleetCache(0)
    nodes, gpus = cache.rows(session, settings=settings, now=now)
    grid = GridBuilder(nodes)
    active = flt.active()
    for row, alloc, _, state in gpus:
        if not active or flt.keeps(row, alloc):
            grid.add(row, alloc, state)
    return {
        "header": _header(grid, session),
        "grid": grid.payload(),
        "gpu_count": sum(grid.counts.values()),
        "flt": flt,
        "plotly": True,
        "options": filter_options(gpus),
        "incidents": incidents.list_incidents(session, state="open", limit=20),
        "now": now,
    }


@router.get("/", response_class=HTMLResponse)
async def fleet_page(
    request: Request,
    partition: str = Query("", max_length=128),
    user: str = Query("", max_length=128),
    account: str = Query("", max_length=128),
    model: str = Query("", max_length=128),
    principal: Principal = Depends(page_viewer),
) -> Response:
    """The fleet page."""
    flt = FleetFilter(partition, user, account, model)
    settings = request.app.state.settings
    build = partial(fleet_data, settings=settings, flt=flt, now=time.time(),
                    cache=request.app.state.fleet_cache)  # fmt: skip
    return await show(request, "fleet.html.jinja", build, principal=principal)


@router.get("/static/plotly.min.js")
async def plotly_js() -> Response:
    """Plotly's bundle, served locally so the page works with no internet access."""
    return Response(
        _plotly_js(),
        media_type="application/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )
