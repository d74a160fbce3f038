"""Plotly figures as plain JSON dicts; the page's script draws them (times in the viewer's zone).

Times are sent as JS milliseconds and drawn as dates, so the browser shows its own time zone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from web.pages.templating import plot_text

PALETTE = ("#1565c0", "#2e7d32", "#c62828", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#ad1457")
_KIND_COLORS = {"xid": "#c62828", "nccl_timeout": "#ef6c00", "cuda_error": "#6a1b9a"}


def ms(ts: float) -> float:
    """UNIX seconds as JS milliseconds."""
    return round(ts * 1000.0)


def _layout(height: int, **extra: Any) -> dict[str, Any]:
    base = {
        "height": height,
        "margin": {"l": 110, "r": 20, "t": 30, "b": 40},
        "xaxis": {"type": "date"},
        "legend": {"orientation": "h"},
    }
    base.update(extra)
    return base


def gpu_timeseries(
    series: dict[str, list[dict[str, float | None]]],
    labels: dict[str, str],
    events: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Utilization, power and memory per GPU over time (three stacked panels), events overlaid."""
    data: list[dict[str, Any]] = []
    for i, (uuid, points) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        x = [ms(float(p["ts"] or 0)) for p in points]
        for field, axis in (("util", "y"), ("power", "y2"), ("mem", "y3")):
            data.append(
                {
                    "type": "scattergl",
                    "mode": "lines",
                    "x": x,
                    "y": [p[field] for p in points],
                    "name": plot_text(labels.get(uuid, uuid)),
                    "legendgroup": uuid,
                    "showlegend": axis == "y",
                    "line": {"color": color, "width": 1.5},
                    "yaxis": axis,
                }
            )
    data.extend(event_markers(events, axis="y"))
    return {
        "data": data,
        "layout": _layout(
            520,
            xaxis={"type": "date", "anchor": "y3"},  # time ticks under the lowest panel
            yaxis={"title": "util %", "domain": [0.68, 1.0], "range": [0, 105]},
            yaxis2={"title": "power W", "domain": [0.35, 0.63]},
            yaxis3={"title": "memory MiB", "domain": [0.0, 0.3]},
        ),
    }


def event_markers(events: Iterable[dict[str, Any]], *, axis: str = "y") -> list[dict[str, Any]]:
    """Events as markers along the top of a panel, one trace per kind, hover = the line."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_kind.setdefault(str(e["kind"]), []).append(e)
    out = []
    for kind, evs in by_kind.items():
        out.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": plot_text(kind),
                "yaxis": axis,
                "x": [ms(e["ts"]) for e in evs],
                "y": [102] * len(evs),
                "text": [plot_text(str(e.get("raw") or e.get("message") or "")[:200]) for e in evs],
                "hovertemplate": "%{x}<br>%{text}<extra>" + plot_text(kind) + "</extra>",
                "marker": {
                    "symbol": "triangle-down",
                    "size": 10,
                    "color": _KIND_COLORS.get(kind, "#37474f"),
                },
            }
        )
    return out


def incident_timeline(
    events: Sequence[dict[str, Any]], jobs: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Events on the affected nodes (y = node) against each affected job's life (bars)."""
    data: list[dict[str, Any]] = []
    for i, job in enumerate(jobs):
        if job.get("start_ts") is None:
            continue
        end = job.get("end_ts") or job["now"]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": plot_text(f"job {job['job_id']}"),
                "x": [ms(job["start_ts"]), ms(end)],
                "y": [plot_text(f"job {job['job_id']}")] * 2,
                "line": {"width": 10, "color": PALETTE[i % len(PALETTE)]},
                "hovertemplate": plot_text(f"job {job['job_id']} ({job.get('state')})")
                + "<extra></extra>",
            }
        )
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_kind.setdefault(str(e["kind"]), []).append(e)
    for kind, evs in by_kind.items():
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": plot_text(kind),
                "x": [ms(e["ts"]) for e in evs],
                "y": [plot_text(e.get("node") or "?") for e in evs],
                "text": [plot_text(str(e.get("raw") or e.get("message") or "")[:200]) for e in evs],
                "hovertemplate": "%{x}<br>%{text}<extra>" + plot_text(kind) + "</extra>",
                "marker": {"size": 11, "color": _KIND_COLORS.get(kind, "#37474f")},
            }
        )
    rows = {str(e.get("node") or "?") for e in events} | {str(j["job_id"]) for j in jobs}
    return {
        "data": data,
        "layout": _layout(max(220, 40 * len(rows) + 100), yaxis={"type": "category"}),
    }


def stacked_bars(
    buckets: Sequence[float], series: dict[str, list[float]], *, title: str
) -> dict[str, Any]:
    """Stacked bars over time (e.g. idle GPU-hours per hour, by user)."""
    x = [ms(b) for b in buckets]
    data = [
        {
            "type": "bar",
            "name": plot_text(name or "?"),
            "x": x,
            "y": ys,
            "marker": {"color": PALETTE[i % len(PALETTE)]},
        }
        for i, (name, ys) in enumerate(series.items())
    ]
    return {"data": data, "layout": _layout(280, barmode="stack", yaxis={"title": title})}
