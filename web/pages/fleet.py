"""The fleet page: header counts, a compact canvas grid by group, filters, and a heatmap."""

from __future__ import annotations

import time
from functools import lru_cache, partial
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from correlator import service as incidents
from timeline.fleet import GpuState, NodeView, count_states
from web import healerview
from web.auth import Principal
from web.fleetstate import STATE_CODES, FleetFilter, apply_filter, classified_fleet
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


def grid_payload(nodes: list[NodeView]) -> dict[str, Any]:
    """The grid as compact arrays the page's canvas script draws (a few bytes per GPU).

    Each node is [name, group index, drained (0 no, 1 by a person, 2 by us), state letters,
    utilizations (-1 unknown), job refs (-1 none)]; jobs are [job id, user].
    """
    groups: dict[str, int] = {}
    jobs: dict[str, int] = {}
    job_rows: list[list[str]] = []
    rows: list[list[Any]] = []
    for n in nodes:
        gi = groups.setdefault(n.group, len(groups))
        refs = []
        for g in n.gpus:
            if g.job_id is None:
                refs.append(-1)
                continue
            if g.job_id not in jobs:
                jobs[g.job_id] = len(job_rows)
                job_rows.append([g.job_id, g.user or ""])
            refs.append(jobs[g.job_id])
        drained = 2 if n.drained_by_us else 1 if n.drained else 0
        states = "".join(STATE_CODES[g.state] for g in n.gpus)
        utils = [-1 if g.util_gpu is None else round(g.util_gpu) for g in n.gpus]
        indexes = [g.index if g.index is not None else i for i, g in enumerate(n.gpus)]
        rows.append([n.name, gi, drained, states, utils, refs, indexes])
    return {
        "groups": list(groups),
        "nodes": rows,
        "jobs": job_rows,
        "colors": {STATE_CODES[s]: c for s, c in STATE_COLORS.items()},
        "labels": {STATE_CODES[s]: lbl for s, lbl in STATE_LABELS.items()},
    }


def _header(nodes: list[NodeView], session: Any) -> dict[str, Any]:
    counts = count_states(nodes)
    drained_ours = sum(1 for n in nodes if n.drained_by_us)
    drained_people = sum(1 for n in nodes if n.drained and not n.drained_by_us)
    header: dict[str, Any] = {
        "total": sum(counts.values()),
        "states": [(s, STATE_LABELS[s], STATE_COLORS[s], counts[s]) for s in GpuState],
        "drained_ours": drained_ours,
        "drained_people": drained_people,
        "healer": healerview.available(),
    }
    if header["healer"]:
        header["breaker"] = healerview.breaker_label(session)
        live = healerview.list_actions(session, state=["approved", "running"], limit=5000)
        header["in_remediation"] = len({a.node for a in live if a.node})
    return header


def fleet_data(session: Any, *, settings: Any, flt: FleetFilter, now: float) -> dict[str, Any]:
    """Everything the fleet page shows."""
    everything = classified_fleet(session, settings=settings, now=now)
    nodes, options = apply_filter(everything, flt)
    return {
        "header": _header(nodes, session),
        "grid": grid_payload(nodes),
        "gpu_count": sum(len(n.gpus) for n in nodes),
        "flt": flt,
        "plotly": True,
        "options": {k: sorted(v) for k, v in vars(options).items()},
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
    build = partial(fleet_data, settings=settings, flt=flt, now=time.time())
    return await show(request, "fleet.html.jinja", build, principal=principal)


@router.get("/static/plotly.min.js")
async def plotly_js() -> Response:
    """Plotly's bundle, served locally so the page works with no internet access."""
    return Response(
        _plotly_js(),
        media_type="application/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )
