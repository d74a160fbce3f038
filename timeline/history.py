"""Bounded history reads for the pages: telemetry in time buckets, fault history, job lineage.

Every query here is bounded by a time window and a row cap, so a page's cost does not grow
with the length of history (long windows will read the telemetry rollups once they exist).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from timeline import samples
from timeline import tables as t

FAULT_KINDS = ("xid", "sxid", "gpu_lost", "ecc", "row_remap", "gsp", "pcie_aer", "nvlink")


_SERIES = {"util": "util_gpu", "power": "power_w", "mem": "mem_used_mb"}


def gpu_series(
    session: Session,
    *,
    uuids: Sequence[str],
    since: float,
    until: float,
    bucket_s: int,
) -> dict[str, list[dict[str, float | None]]]:
    """Per GPU: mean utilization, power and memory used per time bucket in [since, until)."""
    fields = list(_SERIES.values())
    raw = samples.store().series(
        session, uuids=uuids, since=since, until=until, bucket_s=bucket_s, fields=fields
    )
    return {
        uuid: [{"ts": p["ts"]} | {k: _f(p[f]) for k, f in _SERIES.items()} for p in points]
        for uuid, points in raw.items()
    }


def node_utilization(
    session: Session, *, since: float, until: float, bucket_s: int
) -> list[tuple[str, float, float]]:
    """(node, bucket start, mean GPU utilization) over every node, for the fleet heatmap."""
    return samples.store().node_utilization(session, since=since, until=until, bucket_s=bucket_s)


def allocations_between(
    session: Session,
    *,
    since: float,
    until: float,
    node: str | None = None,
    job_id: str | None = None,
    limit: int = 20_000,
) -> list[dict[str, Any]]:
    """Allocations overlapping [since, until) with their job's user, account and partition."""
    a = t.allocations
    stmt = (
        select(a, t.jobs.c.user, t.jobs.c.account, t.jobs.c.partition, t.jobs.c.state)
        .join(t.jobs, and_(a.c.job_id == t.jobs.c.job_id, a.c.scheduler == t.jobs.c.scheduler))
        .where(a.c.start_ts < until, or_(a.c.end_ts.is_(None), a.c.end_ts >= since))
        .order_by(a.c.start_ts)
        .limit(limit)
    )
    if node is not None:
        stmt = stmt.where(a.c.node == node)
    if job_id is not None:
        stmt = stmt.where(a.c.job_id == job_id)
    return [dict(r) for r in session.execute(stmt).mappings()]


def job_allocations(session: Session, *, job_id: str) -> list[dict[str, Any]]:
    """Every GPU (or whole node) a job held, with the GPU's uuid where it is known."""
    a = t.allocations
    g = t.gpus
    stmt = (
        select(a, g.c.uuid.label("known_uuid"), g.c.pci_bus_id)
        .outerjoin(
            g,
            or_(
                g.c.uuid == a.c.gpu_uuid,
                and_(a.c.gpu_uuid.is_(None), g.c.node == a.c.node, g.c.index == a.c.gpu_index),
            ),
        )
        .where(a.c.job_id == job_id)
        .order_by(a.c.node, a.c.gpu_index)
        .limit(1024)
    )
    return [dict(r) for r in session.execute(stmt).mappings()]


def fault_history(
    session: Session,
    *,
    since: float,
    node: str | None = None,
    limit: int = 2000,
) -> list[dict[str, Any]]:
    """Hardware fault events (Xid, ECC, row remap, ...) since `since`, newest first."""
    e = t.events
    stmt = (
        select(
            e.c.id,
            e.c.ts,
            e.c.node,
            e.c.gpu_uuid,
            e.c.pci_bus_id,
            e.c.kind,
            e.c.code,
            e.c.severity,
            e.c.message,
            e.c.count,
            e.c.job_id,
        )
        .where(e.c.ts >= since, e.c.kind.in_(FAULT_KINDS))
        .order_by(e.c.ts.desc(), e.c.id.desc())
        .limit(limit)
    )
    if node is not None:
        stmt = stmt.where(e.c.node == node)
    return [dict(r) for r in session.execute(stmt).mappings()]


def events_by_ids(session: Session, *, ids: Sequence[int]) -> list[dict[str, Any]]:
    """Events with these ids, oldest first."""
    if not ids:
        return []
    stmt = select(t.events).where(t.events.c.id.in_(list(ids)[:500])).order_by(t.events.c.ts)
    return [dict(r) for r in session.execute(stmt).mappings()]


def job_lineage(session: Session, *, job_id: str, depth: int = 20) -> list[dict[str, Any]]:
    """The chain of requeues a job belongs to, first run first (bounded by `depth`)."""
    j = t.jobs
    cols = (j.c.job_id, j.c.state, j.c.requeue_of, j.c.start_ts, j.c.end_ts, j.c.restart_count)
    chain: dict[str, dict[str, Any]] = {}
    root = job_id
    for _ in range(depth):  # walk up to the first run
        row = session.execute(select(*cols).where(j.c.job_id == root).limit(1)).mappings().first()
        if row is None or not row["requeue_of"] or row["requeue_of"] in chain:
            break
        chain[root] = dict(row)
        root = row["requeue_of"]
    frontier: list[str] = [root]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    while frontier and len(out) < depth:  # then down through every requeue of it
        current = frontier.pop(0)
        if current in seen:
            continue
        seen.add(current)
        stmt = select(*cols).where(j.c.job_id == current).limit(1)
        found = session.execute(stmt).mappings().first()
        if found is not None:
            out.append(dict(found))
        kids = session.execute(select(j.c.job_id).where(j.c.requeue_of == current)).scalars()
        frontier.extend(kids)
    return out


def node_gpus(session: Session, *, node: str) -> list[dict[str, Any]]:
    """The GPUs known on one node."""
    stmt = select(t.gpus).where(t.gpus.c.node == node).order_by(t.gpus.c.index)
    return [dict(r) for r in session.execute(stmt).mappings()]


def get_node(session: Session, *, name: str) -> dict[str, Any] | None:
    """One node's row, or None."""
    row = session.execute(select(t.nodes).where(t.nodes.c.name == name)).mappings().first()
    return dict(row) if row else None


def _f(v: Any) -> float | None:
    return None if v is None else round(float(v), 2)


class Holder(NamedTuple):
    """A job holding one GPU (gpu_index >= 0) or a whole node (-1) right now."""

    node: str
    gpu_index: int
    job_id: str
    user: str | None
    account: str | None
    partition: str | None


def holders_at(session: Session, *, at: float) -> list[Holder]:
    """Who holds which GPU (or whole node) at `at`: a narrow read of the open allocations
    for the fleet grid (10k GPUs: one small tuple each)."""
    a, j = t.allocations, t.jobs
    stmt = (
        select(a.c.node, a.c.gpu_index, a.c.job_id, j.c.user, j.c.account, j.c.partition)
        .join(j, and_(a.c.job_id == j.c.job_id, a.c.scheduler == j.c.scheduler))
        .where(a.c.start_ts <= at, or_(a.c.end_ts.is_(None), a.c.end_ts > at))
    )
    return [Holder(*row) for row in session.execute(stmt).all()]


def node_states(session: Session) -> list[dict[str, Any]]:
    """Every node's scheduler state, drain reason and labels (the grid's columns only)."""
    n = t.nodes
    cols = (n.c.name, n.c.state, n.c.reason, n.c.reason_user, n.c.reason_ts, n.c.labels)
    keys = ("name", "state", "reason", "reason_user", "reason_ts", "labels")
    stmt = select(*cols).order_by(n.c.name)
    return [dict(zip(keys, row, strict=True)) for row in session.execute(stmt).all()]


def node_list(session: Session) -> list[dict[str, Any]]:
    """Every node with a row or inventoried GPUs: its scheduler state, drain reason, when an
    agent last sent from it, and how many GPUs it has; by name."""
    n, g = t.nodes, t.gpus
    found = session.execute(select(g.c.node, func.count()).group_by(g.c.node)).all()
    counts: dict[str, int] = {node: int(k) for node, k in found}
    cols = (n.c.name, n.c.state, n.c.reason, n.c.reason_user, n.c.reason_ts, n.c.last_seen_ts)
    keys = ("name", "state", "reason", "reason_user", "reason_ts", "last_seen_ts")
    out = {row[0]: dict(zip(keys, row, strict=True)) for row in session.execute(select(*cols))}
    for name in counts.keys() - out.keys():  # inventoried by an agent, unknown to the scheduler
        out[name] = dict.fromkeys(keys) | {"name": name}
    for name, row in out.items():
        row["gpus"] = counts.get(name, 0)
    return [out[name] for name in sorted(out)]
