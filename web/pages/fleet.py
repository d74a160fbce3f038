"""The fleet page: a grid of GPUs by node, colored by state, with a utilization heatmap."""

from __future__ import annotations

import time
from collections import Counter
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from correlator import service as incidents
from timeline import fleet, queries
from timeline.fleet import GpuState, NodeView
from web.auth import Principal
from web.pages.templating import page_viewer, plot_text, plotly_figure, render

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


def utilization_heatmap(nodes: list[NodeView]) -> Markup:
    """A Plotly heatmap of GPU utilization, node by GPU index, as an HTML fragment.

    Node names and job ids are a cluster's text: escaped for Plotly (which reads tags in
    labels) and serialized for the script by plotly_figure.
    """
    width = max((len(n.gpus) for n in nodes), default=0)
    z = [[g.util_gpu for g in n.gpus] + [None] * (width - len(n.gpus)) for n in nodes]
    text = [[plot_text(f"{g.state.value} {g.job_id or ''}") for g in n.gpus] for n in nodes]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[f"GPU {i}" for i in range(width)],
            y=[plot_text(n.name) for n in nodes],
            text=text,
            zmin=0,
            zmax=100,
            colorscale="Viridis",
            colorbar={"title": "util %"},
            hovertemplate="%{y} %{x}<br>util %{z}%<br>%{text}<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(240, 26 * len(nodes) + 80),
        margin={"l": 110, "r": 20, "t": 10, "b": 40},
        yaxis={"autorange": "reversed"},
    )
    return plotly_figure(fig, "util-heatmap")


def _page_data(request: Request) -> dict[str, Any]:
    settings = request.app.state.settings
    now = time.time()
    with request.app.state.session_factory() as session:
        nodes = fleet.fleet_view(session, now=now, idle_threshold=settings.idle_util_threshold)
        events = queries.events_in_window(session, since=now - 3600, limit=25, newest_first=True)
        open_incidents = incidents.list_incidents(session, state="open", limit=50)
        idle_by_user = incidents.idle_totals(session, by="user", state="open")
    counts = Counter(g.state for n in nodes for g in n.gpus)
    return {
        "nodes": nodes,
        "counts": [(s, STATE_LABELS[s], STATE_COLORS[s], counts.get(s, 0)) for s in GpuState],
        "total": sum(counts.values()),
        "colors": STATE_COLORS,
        "labels": STATE_LABELS,
        "events": events,
        "incidents": open_incidents,
        "idle_by_user": idle_by_user,
        "heatmap": utilization_heatmap(nodes) if nodes else None,
        "refresh_s": settings.page_refresh_s,
        "now": now,
    }


@router.get("/", response_class=HTMLResponse)
async def fleet_grid(request: Request, principal: Principal = Depends(page_viewer)) -> Response:
    """The fleet grid page."""
    data = await run_in_threadpool(_page_data, request)
    return render(request, "fleet.html.jinja", data, principal=principal)


@router.get("/static/plotly.min.js")
async def plotly_js() -> Response:
    """Plotly's bundle, served locally so the page works with no internet access."""
    return Response(
        _plotly_js(),
        media_type="application/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )
