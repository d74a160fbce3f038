"""Idle GPUs: jobs holding GPUs that do no work, what it costs, per user and account, over time."""

from __future__ import annotations

import time
from collections import defaultdict
from functools import partial
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from correlator import service as incidents
from correlator.models import IdleFinding
from timeline.settings import Settings
from web.auth import Principal
from web.pages import charts
from web.pages.common import show
from web.pages.templating import page_viewer

router = APIRouter(include_in_schema=False)

SortKey = Literal["gpu_hours", "cost", "idle_s", "user", "account", "job_id", "node"]
_TOP_USERS = 6


def by_job(findings: list[IdleFinding]) -> list[dict[str, Any]]:
    """One row per job: its idle GPUs, since when, for how long, GPU-hours and cost."""
    rows: dict[str, dict[str, Any]] = {}
    for f in findings:
        row = rows.get(f.job_id)
        if row is None:
            row = rows[f.job_id] = {
                "job_id": f.job_id,
                "user": f.user,
                "account": f.account,
                "node": f.node,
                "gpus": [],
                "idle_since_ts": f.idle_since_ts,
                "last_seen_ts": f.last_seen_ts,
                "gpu_hours": 0.0,
                "cost": 0.0,
                "open": False,
            }
        row["gpus"].append((f.node, f.gpu_index))
        row["idle_since_ts"] = min(row["idle_since_ts"], f.idle_since_ts)
        row["last_seen_ts"] = max(row["last_seen_ts"], f.last_seen_ts)
        row["gpu_hours"] += f.gpu_hours
        row["cost"] += f.cost
        row["open"] = row["open"] or f.state.value == "open"
    for row in rows.values():
        row["idle_s"] = row["last_seen_ts"] - row["idle_since_ts"]
    return list(rows.values())


def _sort_value(row: dict[str, Any], key: str) -> Any:
    value = row.get(key)
    return value if value is not None else ""


def totals(findings: list[IdleFinding], by: str) -> list[dict[str, Any]]:
    """GPU-hours, cost and GPUs per user or account, most wasteful first."""
    acc: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"gpu_hours": 0.0, "cost": 0.0, "gpus": set()}
    )
    for f in findings:
        row = acc[getattr(f, by) or "?"]
        row["gpu_hours"] += f.gpu_hours
        row["cost"] += f.cost
        row["gpus"].add(f.gpu_uuid)
    out = [
        {"key": k, "gpu_hours": v["gpu_hours"], "cost": v["cost"], "gpus": len(v["gpus"])}
        for k, v in acc.items()
    ]
    return sorted(out, key=lambda r: -r["gpu_hours"])


def trend(findings: list[IdleFinding], *, since: float, now: float) -> dict[str, Any]:
    """Idle GPU-hours per time bucket over the window, stacked by user (top users, then rest)."""
    span = now - since
    bucket = 3600.0 if span > 6 * 3600 else 600.0 if span > 3600 else 300.0
    start = since - since % bucket
    n = int((now - start) // bucket) + 1
    by_user: dict[str, list[float]] = defaultdict(lambda: [0.0] * n)
    for f in findings:
        lo, hi = max(f.idle_since_ts, start), min(f.last_seen_ts, now)
        i = int((lo - start) // bucket)
        while lo < hi and i < n:
            edge = min(start + (i + 1) * bucket, hi)
            by_user[f.user or "?"][i] += (edge - lo) / 3600.0
            lo, i = edge, i + 1
    ranked = sorted(by_user, key=lambda u: -sum(by_user[u]))
    series = {u: [round(v, 3) for v in by_user[u]] for u in ranked[:_TOP_USERS]}
    if len(ranked) > _TOP_USERS:
        rest = [sum(by_user[u][i] for u in ranked[_TOP_USERS:]) for i in range(n)]
        series["others"] = [round(v, 3) for v in rest]
    buckets = [start + i * bucket for i in range(n)]
    return charts.stacked_bars(buckets, series, title="idle GPU-hours")


def idle_data(
    session: Session, *, settings: Settings, hours: float, sort: str, desc: bool, now: float
) -> dict[str, Any]:
    """Everything the idle page shows, over the last `hours`."""
    since = now - hours * 3600
    findings = incidents.list_idle_findings(session, seen_since=since, limit=5000)
    rows = sorted(by_job(findings), key=lambda r: _sort_value(r, sort), reverse=desc)
    return {
        "jobs": rows,
        "open_count": sum(1 for f in findings if f.state.value == "open"),
        "by_user": totals(findings, "user"),
        "by_account": totals(findings, "account"),
        "trend": trend(findings, since=since, now=now),
        "hours": hours,
        "sort": sort,
        "desc": desc,
        "threshold": settings.idle_util_threshold,
        "min_minutes": settings.idle_min_duration_s / 60.0,
        "price": settings.idle_cost_per_gpu_hour,
        "total_hours": sum(f.gpu_hours for f in findings),
        "total_cost": sum(f.cost for f in findings),
        "plotly": True,
    }


@router.get("/idle", response_class=HTMLResponse)
async def idle_page(
    request: Request,
    hours: float = Query(24.0, gt=0, le=24 * 90, allow_inf_nan=False),
    sort: SortKey = "gpu_hours",
    order: Literal["asc", "desc"] = "desc",
    principal: Principal = Depends(page_viewer),
) -> Response:
    """Allocated GPUs doing nothing, sortable, with totals and a trend."""
    settings = request.app.state.settings
    build = partial(
        idle_data, settings=settings, hours=hours, sort=sort, desc=order == "desc", now=time.time()
    )
    return await show(request, "idle.html.jinja", build, principal=principal)
