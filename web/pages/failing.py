"""Failing GPUs and nodes: what incidents blame now, fault history, repeat offenders, drains."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from functools import partial
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from correlator import service as incidents
from correlator.taxonomy import Blame
from timeline import history, queries
from timeline.fleet import OUR_DRAIN_PREFIX, NodeView
from web.auth import Principal
from web.pages.common import show
from web.pages.templating import page_viewer

router = APIRouter(include_in_schema=False)


def _gpu_key(e: dict[str, Any]) -> tuple[str, str]:
    return (str(e.get("node") or "?"), str(e.get("gpu_uuid") or e.get("pci_bus_id") or "node"))


def fault_table(
    events: list[dict[str, Any]], gpus: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per GPU (or node): fault counts by kind/code, first and last seen, most faults first."""
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for e in events:
        key = _gpu_key(e)
        row = acc.get(key)
        if row is None:
            gpu = gpus.get(str(e.get("gpu_uuid"))) or {}
            row = acc[key] = {
                "node": key[0],
                "gpu": key[1],
                "index": gpu.get("index"),
                "kinds": Counter(),
                "first": e["ts"],
                "last": e["ts"],
                "total": 0,
            }
        label = f"{e['kind']} {e['code']}" if e.get("code") is not None else str(e["kind"])
        row["kinds"][label] += int(e.get("count") or 1)
        row["total"] += int(e.get("count") or 1)
        row["first"], row["last"] = min(row["first"], e["ts"]), max(row["last"], e["ts"])
    return sorted(acc.values(), key=lambda r: -r["total"])


def repeat_offenders(incs: list[Any]) -> list[dict[str, Any]]:
    """GPUs or nodes that machine-blamed incidents named more than once in the window."""
    acc: dict[tuple[str, Any], list[Any]] = defaultdict(list)
    for i in incs:
        if i.blame == Blame.NODE.value and i.culprit_node:
            acc[(i.culprit_node, i.culprit_gpu_index)].append(i)
    out = [
        {"node": node, "index": index, "incidents": sorted(found, key=lambda i: -i.opened_ts)}
        for (node, index), found in acc.items()
        if len(found) > 1
    ]
    return sorted(out, key=lambda r: -len(r["incidents"]))


def failing_data(session: Session, *, days: float, now: float) -> dict[str, Any]:
    """Everything the failing page shows."""
    since = now - days * 86400
    open_node_blamed = [
        i
        for i in incidents.list_incidents(session, state="open", limit=1000)
        if i.blame == Blame.NODE.value
    ]
    recent = incidents.list_incidents(session, updated_since=since, limit=2000)
    gpus = {g["uuid"]: g for g in queries.latest_gpu_samples(session)}
    nodes = [
        NodeView(
            n["name"],
            n["state"],
            n["reason"],
            reason_user=n.get("reason_user"),
            reason_ts=n.get("reason_ts"),
        )
        for n in queries.list_nodes(session)
    ]
    return {
        "failing": open_node_blamed,
        "drained": [n for n in nodes if n.drained],
        "our_prefix": OUR_DRAIN_PREFIX,
        "faults": fault_table(history.fault_history(session, since=since), gpus)[:300],
        "repeats": repeat_offenders(recent),
        "days": days,
    }


@router.get("/failing", response_class=HTMLResponse)
async def failing_page(
    request: Request,
    days: float = Query(7.0, gt=0, le=90),
    principal: Principal = Depends(page_viewer),
) -> Response:
    """GPUs and nodes that open incidents blame, with their history and drains."""
    build = partial(failing_data, days=days, now=time.time())
    return await show(request, "failing.html.jinja", build, principal=principal)
