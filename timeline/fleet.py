"""The fleet at a glance: every GPU classified busy, allocated-but-idle, free, failing or stale."""

from __future__ import annotations

import enum
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from timeline import queries
from timeline import tables as t
from timeline.models import EventKind, Severity


class GpuState(enum.StrEnum):
    """What a person wants to know about a GPU first."""

    BUSY = "busy"
    IDLE_ALLOCATED = "idle_allocated"  # a job holds it but it does no work
    FREE = "free"
    FAILING = "failing"
    STALE = "stale"  # no telemetry for a while: the agent or the node is gone


# Kinds that mean the hardware itself is suspect, whatever their severity says.
_FAILING_KINDS = {
    EventKind.XID.value,
    EventKind.SXID.value,
    EventKind.GPU_LOST.value,
    EventKind.ROW_REMAP.value,
    EventKind.GSP.value,
    EventKind.PCIE_AER.value,
    EventKind.NVLINK.value,
}
_BAD_SEVERITIES = {Severity.ERROR.value, Severity.CRITICAL.value}


@dataclass
class GpuView:
    """One GPU cell of the fleet grid."""

    uuid: str
    node: str
    index: int | None
    pci_bus_id: str | None
    name: str | None
    state: GpuState
    util_gpu: float | None
    power_w: float | None
    mem_used_mb: float | None
    mem_total_mb: float | None
    temp_gpu: float | None
    sample_ts: float | None
    job_id: str | None = None
    user: str | None = None
    reason: str | None = None  # why it is failing, in a few words


@dataclass
class NodeView:
    """A row of the grid: one node and its GPUs."""

    name: str
    state: str | None
    reason: str | None
    gpus: list[GpuView] = field(default_factory=list)


def _suspect_events(session: Session, *, since: float) -> list[dict[str, Any]]:
    stmt = (
        select(
            t.events.c.node,
            t.events.c.gpu_uuid,
            t.events.c.pci_bus_id,
            t.events.c.kind,
            t.events.c.code,
            t.events.c.message,
        )
        .where(t.events.c.ts >= since)
        .where(
            or_(
                t.events.c.kind.in_(_FAILING_KINDS),
                (t.events.c.severity.in_(_BAD_SEVERITIES) & t.events.c.gpu_uuid.is_not(None)),
            )
        )
        .order_by(t.events.c.ts)
    )
    return [dict(r) for r in session.execute(stmt).mappings()]


def _failure_reason(event: dict[str, Any]) -> str:
    if event["kind"] in (EventKind.XID.value, EventKind.SXID.value) and event["code"] is not None:
        return f"{event['kind'].upper()} {event['code']}"
    return str(event["kind"]).replace("_", " ")


def classify(
    row: dict[str, Any],
    *,
    now: float,
    allocated: bool,
    failing_reason: str | None,
    idle_threshold: float,
    stale_after_s: float,
) -> GpuState:
    """The state of one GPU from its newest sample, its allocation and recent failures."""
    if failing_reason is not None or row.get("remap_failure"):
        return GpuState.FAILING
    if row.get("ts") is None or now - float(row["ts"]) > stale_after_s:
        return GpuState.STALE
    util = row.get("util_gpu") or 0.0
    if allocated:
        return GpuState.BUSY if util > idle_threshold else GpuState.IDLE_ALLOCATED
    return GpuState.BUSY if util > idle_threshold else GpuState.FREE


def fleet_view(
    session: Session,
    *,
    now: float,
    idle_threshold: float = 5.0,
    failing_window_s: float = 3600.0,
    stale_after_s: float = 120.0,
) -> list[NodeView]:
    """Every node with its GPUs classified, for the fleet grid and /api/v1/fleet."""
    latest = queries.latest_gpu_samples(session)
    allocs = queries.current_allocations(session, at=now)
    by_gpu: dict[tuple[str, int], dict[str, Any]] = {}
    whole_node: dict[str, dict[str, Any]] = {}
    for a in allocs:
        if a["gpu_index"] is None or a["gpu_index"] < 0:
            whole_node[a["node"]] = a
        else:
            by_gpu[(a["node"], a["gpu_index"])] = a
    failing: dict[str, str] = {}
    for e in _suspect_events(session, since=now - failing_window_s):
        for key in (e["gpu_uuid"], e["pci_bus_id"] and f"{e['node']}|{e['pci_bus_id']}"):
            if key:
                failing[key] = _failure_reason(e)
    nodes = {
        n["name"]: NodeView(n["name"], n["state"], n["reason"]) for n in queries.list_nodes(session)
    }
    grouped: dict[str, list[GpuView]] = defaultdict(list)
    for row in latest:
        alloc = by_gpu.get((row["node"], row["index"])) or whole_node.get(row["node"])
        reason = failing.get(row["uuid"]) or failing.get(f"{row['node']}|{row['pci_bus_id']}")
        state = classify(
            row,
            now=now,
            allocated=alloc is not None,
            failing_reason=reason,
            idle_threshold=idle_threshold,
            stale_after_s=stale_after_s,
        )
        grouped[row["node"]].append(
            GpuView(
                uuid=row["uuid"],
                node=row["node"],
                index=row["index"],
                pci_bus_id=row["pci_bus_id"],
                name=row["name"],
                state=state,
                util_gpu=row.get("util_gpu"),
                power_w=row.get("power_w"),
                mem_used_mb=row.get("mem_used_mb"),
                mem_total_mb=row.get("mem_total_mb"),
                temp_gpu=row.get("temp_gpu"),
                sample_ts=row.get("ts"),
                job_id=alloc["job_id"] if alloc else None,
                user=alloc["user"] if alloc else None,
                reason=reason or ("row remap failure" if row.get("remap_failure") else None),
            )
        )
    for name, gpus in grouped.items():
        nodes.setdefault(name, NodeView(name, None, None)).gpus = gpus
    return [nodes[name] for name in sorted(nodes)]
