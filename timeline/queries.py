"""Read queries over the timeline: latest state per GPU, events in a window, jobs on a GPU."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from timeline import samples
from timeline import tables as t
from timeline.samples_stage import raw_tables


def latest_gpu_samples(
    session: Session,
    *,
    node: str | None = None,
    fields: Sequence[str] | None = None,
    gpu_columns: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Each known GPU (every inventory column, or only `gpu_columns`) with its newest sample
    (every field, or only `fields`; None where it has none)."""
    cols = [c.name for c in t.gpus.columns] if gpu_columns is None else list(gpu_columns)
    stmt = select(*(t.gpus.c[c] for c in cols)).order_by(t.gpus.c.node, t.gpus.c.index)
    if node is not None:
        stmt = stmt.where(t.gpus.c.node == node)
    # Tuples zipped into dicts: the fleet page reads every GPU on each build (10k-100k rows).
    gpus = [dict(zip(cols, r, strict=True)) for r in session.execute(stmt)]
    wanted = None if node is None else [g["uuid"] for g in gpus]
    newest = samples.store().latest(session, uuids=wanted, fields=fields)
    keys = (*(t.SAMPLE_FIELDS if fields is None else fields), "ts")
    empty = dict.fromkeys(keys)
    for g in gpus:
        found = newest.get(g["uuid"])
        g.update(empty if found is None else {k: found.get(k) for k in keys})
    return gpus


def events_in_window(
    session: Session,
    *,
    since: float | None = None,
    until: float | None = None,
    node: str | None = None,
    kind: str | None = None,
    job_id: str | None = None,
    after_id: int | None = None,
    limit: int = 1000,
    newest_first: bool = False,
) -> list[dict[str, Any]]:
    """Events in [since, until), oldest first (or newest first), optionally filtered."""
    order = (
        (t.events.c.ts.desc(), t.events.c.id.desc())
        if newest_first
        else (t.events.c.ts, t.events.c.id)
    )
    stmt = select(t.events).order_by(*order).limit(limit)
    if since is not None:
        stmt = stmt.where(t.events.c.ts >= since)
    if until is not None:
        stmt = stmt.where(t.events.c.ts < until)
    if node is not None:
        stmt = stmt.where(t.events.c.node == node)
    if kind is not None:
        stmt = stmt.where(t.events.c.kind == kind)
    if job_id is not None:
        stmt = stmt.where(t.events.c.job_id == job_id)
    if after_id is not None:
        stmt = stmt.where(t.events.c.id > after_id)
    return [dict(r) for r in session.execute(stmt).mappings()]


def jobs_holding_gpu(
    session: Session,
    *,
    node: str,
    at: float,
    gpu_index: int | None = None,
    gpu_uuid: str | None = None,
) -> list[dict[str, Any]]:
    """Jobs whose allocation covers this GPU (or the whole node) at time `at`."""
    a = t.allocations
    stmt = (
        select(t.jobs, a.c.gpu_index, a.c.start_ts.label("alloc_start"))
        .join(a, and_(a.c.job_id == t.jobs.c.job_id, a.c.scheduler == t.jobs.c.scheduler))
        .where(a.c.node == node, a.c.start_ts <= at, or_(a.c.end_ts.is_(None), a.c.end_ts > at))
    )
    gpu_match = [a.c.gpu_index == -1]
    if gpu_index is not None:
        gpu_match.append(a.c.gpu_index == gpu_index)
    if gpu_uuid is not None:
        gpu_match.append(a.c.gpu_uuid == gpu_uuid)
    if gpu_index is not None or gpu_uuid is not None:
        stmt = stmt.where(or_(*gpu_match))
    seen: dict[Any, dict[str, Any]] = {}
    for row in session.execute(stmt).mappings():
        seen.setdefault(row["id"], dict(row))
    return list(seen.values())


def current_allocations(session: Session, *, at: float) -> list[dict[str, Any]]:
    """All allocations open at time `at`, with their job's user and account."""
    a = t.allocations
    stmt = (
        select(
            a,
            t.jobs.c.user,
            t.jobs.c.account,
            t.jobs.c.partition,
            t.jobs.c.name,
            t.jobs.c.state,
        )
        .join(t.jobs, and_(a.c.job_id == t.jobs.c.job_id, a.c.scheduler == t.jobs.c.scheduler))
        .where(a.c.start_ts <= at, or_(a.c.end_ts.is_(None), a.c.end_ts > at))
    )
    return [dict(r) for r in session.execute(stmt).mappings()]


def list_nodes(session: Session) -> list[dict[str, Any]]:
    """All nodes, by name."""
    return [dict(r) for r in session.execute(select(t.nodes).order_by(t.nodes.c.name)).mappings()]


def list_jobs(
    session: Session,
    *,
    state: str | None = None,
    limit: int = 500,
    user: str | None = None,
    account: str | None = None,
    partition: str | None = None,
    text: str | None = None,
) -> list[dict[str, Any]]:
    """Jobs, newest first; each filter given must match (`text`: part of the id or name)."""
    j = t.jobs
    stmt = select(j).order_by(j.c.updated_ts.desc(), j.c.id.desc()).limit(limit)
    for column, wanted in ((j.c.state, state), (j.c.user, user), (j.c.account, account),
                           (j.c.partition, partition)):  # fmt: skip
        if wanted is not None:
            stmt = stmt.where(column == wanted)
    if text:  # a literal substring: autoescape makes the user's % and _ match themselves
        stmt = stmt.where(
            or_(
                j.c.job_id.icontains(text, autoescape=True),
                j.c.name.icontains(text, autoescape=True),
            )
        )
    return [dict(r) for r in session.execute(stmt).mappings()]


def get_job(
    session: Session, *, job_id: str, scheduler: str | None = None
) -> dict[str, Any] | None:
    """One job by id (any scheduler unless given)."""
    stmt = select(t.jobs).where(t.jobs.c.job_id == job_id)
    if scheduler is not None:
        stmt = stmt.where(t.jobs.c.scheduler == scheduler)
    row = session.execute(stmt.limit(1)).mappings().first()
    return dict(row) if row else None


def count_rows(session: Session, *, table: str) -> int:
    """Row count of one timeline table (for tests, health and benchmarks)."""
    tables = [t.metadata.tables[table]]
    if table == "samples":  # on SQLite, staged samples are samples too (timeline.samples_stage)
        tables = raw_tables(session)
    # One statement, one snapshot: a move of the stage between two counts would count twice.
    counts = [select(func.count()).select_from(x).scalar_subquery() for x in tables]
    return int(session.execute(select(sum(counts[1:], counts[0]))).scalar_one())
