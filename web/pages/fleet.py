"""The fleet page: header counts, a compact canvas grid by group, filters, and a heatmap."""

from __future__ import annotations

import time
from functools import lru_cache, partial
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from correlator import service as incidents
from timeline.fleet import GpuState
from web import healerview
from web.auth import Principal
from web.fleetgrid import STATE_COLORS, STATE_LABELS, Grid
from web.fleetstate import FleetCache, FleetFilter
from web.pages.common import show
from web.pages.templating import page_viewer

router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _header(grid: Grid, session: Any) -> dict[str, Any]:
    counts = grid.counts
    header: dict[str, Any] = {
        "total": sum(counts.values()),
        "states": [(s, STATE_LABELS[s], STATE_COLORS[s], counts[s]) for s in GpuState],
        "drained_ours": grid.drained_ours,
        "drained_people": grid.drained_people,
    }
    header["breaker"] = healerview.breaker_label(session)
    live = healerview.list_actions(session, state=["approved", "running"], limit=5000)
    header["in_remediation"] = len({a.node for a in live if a.node})
    return header


def fleet_data(
    session: Any, *, settings: Any, flt: FleetFilter, now: float, cache: FleetCache | None = None
) -> dict[str, Any]:
    """Everything the fleet page shows (nothing here is rendered per GPU: the grid goes to
    the page as one JSON payload, serialized once per cached classification)."""
    cache = cache or FleetCache(0)
    snap = cache.snapshot(session, settings=settings, now=now, rows=flt.active())
    grid = snap.filtered_grid(flt)
    return {
        "header": _header(grid, session),
        "grid": grid,
        "grid_json": grid.script_json(),
        "gpu_count": sum(grid.counts.values()),
        "flt": flt,
        # Only the heatmap, drawn after the page is shown: Plotly must not hold up the grid.
        "plotly": "defer",
        "options": snap.options(),
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
