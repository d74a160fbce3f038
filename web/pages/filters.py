"""Jinja filters of the pages: times the browser shows in the viewer's zone, numbers, links."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from jinja2 import Environment
from markupsafe import Markup, escape


def when(ts: Any) -> Markup:
    """A <time> the page's script rewrites into the viewer's time zone (UTC until it runs)."""
    if ts is None:
        return Markup("")
    try:
        value = float(ts)
        utc = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(value))
    except (OverflowError, OSError, ValueError, TypeError):
        return Markup("?")  # a time no clock can show: never a 500
    return Markup('<time data-ts="{:.3f}">{} UTC</time>').format(value, utc)


def duration(seconds: Any) -> str:
    """1h 05m, 12m, 40s."""
    if seconds is None:
        return ""
    s = max(int(float(seconds)), 0)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m"
    return f"{s}s"


def path(value: Any) -> str:
    """One URL path segment (job ids and node names are a cluster's text)."""
    return quote(str(value), safe="")


def node_link(node: Any) -> Markup:
    """A link to a node's page."""
    if not node:
        return Markup("")
    return Markup('<a href="/nodes/{}">{}</a>').format(path(node), escape(node))


def job_link(job_id: Any) -> Markup:
    """A link to a job's page."""
    if not job_id:
        return Markup("")
    return Markup('<a href="/jobs/{}">{}</a>').format(path(job_id), escape(job_id))


def incident_link(incident_id: Any, text: Any = None) -> Markup:
    """A link to an incident's page."""
    if incident_id is None:
        return Markup("")
    label = text if text is not None else f"#{incident_id}"
    return Markup('<a href="/incidents/{}">{}</a>').format(int(incident_id), label)


def gpu_link(node: Any, index: Any, label: Any = None) -> Markup:
    """A link to one GPU, on its node's page."""
    if not node:
        return Markup("")
    text = label if label is not None else f"GPU {index if index is not None else '?'}"
    anchor = f"#gpu-{int(index)}" if index is not None else ""
    return Markup('<a href="/nodes/{}{}">{}</a>').format(path(node), anchor, text)


def register(env: Environment) -> None:
    """Add the filters to the pages' one environment."""
    env.filters.update(
        when=when,
        duration=duration,
        path=path,
        node_link=node_link,
        job_link=job_link,
        incident_link=incident_link,
        gpu_link=gpu_link,
    )
