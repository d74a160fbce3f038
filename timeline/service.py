"""The store API: append batches and query the timeline. Callers own the transaction."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from timeline import claims, samples_sql
from timeline import samples as sample_store
from timeline import tables as t
from timeline.bounds import MESSAGE_MAX, clean_text
from timeline.db import driver_connection, marks, upsert_insert
from timeline.errors import BatchTooLarge
from timeline.models import (
    Allocation,
    AppendResult,
    Batch,
    Event,
    EventKind,
    GpuInfo,
    Job,
    JobPatch,
    Node,
    RejectedItem,
    SampleRow,
    Scheduler,
    Severity,
)
from timeline.pci import normalize_pci_bus_id


def append_batch(
    session: Session,
    *,
    batch: Batch,
    received_ts: float | None = None,
    max_items: int = 0,
    digest: str | None = None,
    rejected: Sequence[RejectedItem] = (),
    samples: Sequence[SampleRow] | None = None,
) -> AppendResult:
    """Store a batch's items together, once per batch_id; a replay stores nothing again.

    `digest` (of the body as sent) tells a replay, answered `duplicate`, from another batch
    under a reused id, refused with BatchConflict. `rejected` items (already left out of
    `batch`) are reported back and noted as one `agent` event per node every few minutes.
    `samples`: the batch's samples as light rows (the ingest's), instead of `batch.samples`.
    """
    if samples is None:
        samples = [SampleRow.of(s) for s in batch.samples]
    elif batch.samples:
        raise ValueError("samples given twice: as rows and in the batch")
    size = batch.size() + (len(samples) - len(batch.samples))
    if max_items and size > max_items:
        raise BatchTooLarge(f"batch has {size} items; the limit is {max_items}")
    now = received_ts if received_ts is not None else time.time()
    store = sample_store.store()
    # Before the claim takes the write lock (SQLite's is the whole database), as the group
    # writer does; a replay is read as stored and is not written again.
    early = samples and not store.in_transaction
    if early and not claims.stored_ids(session, ids=[batch.batch_id]):
        store.append(session, node=batch.node, samples=samples)
    if not claims.claim(session, batch=batch, samples=len(samples), digest=digest, now=now):
        return AppendResult(batch_id=batch.batch_id, duplicate=True, rejected=list(rejected))
    stored_events = _append_items(session, batch=batch, rejected=rejected, size=size, now=now)
    # Last: the rows every batch of a node rewrites (its GPUs' gpu_latest, its nodes row)
    # stay locked until the commit; written last, concurrent batches wait the least.
    if store.in_transaction:
        store.append(session, node=batch.node, samples=samples)
    if samples or batch.gpus:  # an agent on that node; cluster sources send neither
        _touch_node(session, name=batch.node, now=now)
    return AppendResult(
        batch_id=batch.batch_id,
        duplicate=False,
        samples=len(samples),
        events=stored_events,
        gpus=len(batch.gpus),
        jobs=len(batch.jobs),
        allocations=len(batch.allocations),
        nodes=len(batch.nodes),
        job_patches=len(batch.job_patches),
        rejected=list(rejected),
    )


def _append_items(
    session: Session, *, batch: Batch, rejected: Sequence[RejectedItem], size: int, now: float
) -> int:
    """A claimed batch's items other than samples; returns the events stored."""
    upsert_gpus(session, gpus=batch.gpus, now=now)
    upsert_nodes(session, nodes=batch.nodes, now=now)
    stored_events = append_events(session, events=batch.events, batch_id=batch.batch_id, now=now)
    upsert_jobs(session, jobs=batch.jobs, now=now)
    upsert_allocations(session, allocations=batch.allocations)
    patch_jobs(session, patches=batch.job_patches)
    if rejected:
        note = rejection_event(batch, rejected, now, size=size)
        append_events(session, events=[note], now=now)
    return stored_events


REJECTION_NOTE_EVERY_S = 300.0  # one `agent` event per node per this long, however many batches


def rejection_event(
    batch: Batch, rejected: Sequence[RejectedItem], now: float, *, size: int | None = None
) -> Event:
    """The server's note that it refused items from a node's agent (shown with its events);
    `size`: the items kept, when the batch does not hold them all (samples as rows)."""
    by_kind: dict[str, int] = {}
    for r in rejected:
        by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
    first = [f"{e.field}: {e.error}" for r in rejected[:3] for e in r.errors[:2]]
    total = len(rejected) + (batch.size() if size is None else size)
    return Event(
        ts=now,
        node=batch.node,
        source="ingest",
        kind=EventKind.AGENT,
        severity=Severity.WARNING,
        # Field paths may carry an agent's own (hostile) key names: cleaned, capped.
        message=clean_text(
            f"rejected {len(rejected)} of {total} items from agent {batch.agent}: "
            + "; ".join(first),
            MESSAGE_MAX,
        ),
        payload={"rejected": len(rejected), "by_kind": by_kind, "batch_id": batch.batch_id},
        dedup_key=f"rejected:{batch.node}:{int(now // REJECTION_NOTE_EVERY_S)}"[:255],
    )


def append_events(
    session: Session, *, events: Sequence[Event], batch_id: str | None = None, now: float
) -> int:
    """Insert events; one with a (source, dedup_key) already stored is skipped. Returns stored."""
    if not events:
        return 0
    rows = []
    for e in events:
        row = e.model_dump(mode="json")
        row.update(
            batch_id=batch_id, received_ts=now, pci_bus_id=normalize_pci_bus_id(row["pci_bus_id"])
        )
        rows.append(row)
    keyed = [r for r in rows if r["dedup_key"] is not None]
    plain = [r for r in rows if r["dedup_key"] is None]
    if plain:
        session.execute(t.events.insert(), plain)
    stored = len(plain)
    if keyed:  # one statement for all of them; RETURNING tells which were new
        stmt = (
            upsert_insert(session, t.events)
            .on_conflict_do_nothing(index_elements=["source", "dedup_key"])
            .returning(t.events.c.id)
        )
        stored += len(session.execute(stmt, keyed).all())
    return stored


def upsert_gpus(session: Session, *, gpus: Iterable[GpuInfo], now: float) -> None:
    """Insert or refresh GPU identities, each with its integer id (gpu_ids)."""
    rows = [g.model_dump() | {"updated_ts": now} for g in gpus]
    by_node: dict[str, set[str]] = {}
    for row in rows:
        by_node.setdefault(row["node"], set()).add(row["uuid"])
    ids: dict[str, int] = {}
    for node, uuids in by_node.items():
        ids |= samples_sql.gpu_ids(session, node=node, uuids=uuids)
    for row in rows:
        row["pci_bus_id"] = normalize_pci_bus_id(row["pci_bus_id"])
        row["gpu_id"] = ids[row["uuid"]]
        stmt = upsert_insert(session, t.gpus).values(**row)
        session.execute(
            stmt.on_conflict_do_update(
                index_elements=["uuid"], set_={k: stmt.excluded[k] for k in row if k != "uuid"}
            )
        )


def upsert_nodes(session: Session, *, nodes: Iterable[Node], now: float) -> None:
    """Insert or refresh nodes as a scheduler reports them."""
    for n in nodes:
        row = n.model_dump(mode="json")
        row["updated_ts"] = row["updated_ts"] or now
        stmt = upsert_insert(session, t.nodes).values(**row)
        session.execute(
            stmt.on_conflict_do_update(
                index_elements=["name"], set_={k: stmt.excluded[k] for k in row if k != "name"}
            )
        )


def _touch_node(session: Session, *, name: str, now: float) -> None:
    touch_nodes(session, seen={name: now})


def touch_nodes(session: Session, *, seen: dict[str, float]) -> None:
    """Mark nodes seen (name -> when), in name order (the row locks' one order)."""
    # Through the driver, as _claim; a new node gets the table's defaults (JSON '{}', '[]').
    cur = driver_connection(session).cursor()
    try:
        cur.executemany(
            "INSERT INTO nodes (name, cluster, labels, taints, last_seen_ts) "
            f"VALUES ({marks(session, 5)}) "
            "ON CONFLICT (name) DO UPDATE SET last_seen_ts = excluded.last_seen_ts",
            [(name, "default", "{}", "[]", seen[name]) for name in sorted(seen)],
        )
    finally:
        cur.close()


def upsert_jobs(session: Session, *, jobs: Iterable[Job], now: float) -> None:
    """Insert jobs or refresh them with the newest observation."""
    for j in jobs:
        row = j.model_dump(mode="json") | {"updated_ts": now}
        stmt = upsert_insert(session, t.jobs).values(**row)
        keys = ["scheduler", "cluster", "job_id"]
        session.execute(
            stmt.on_conflict_do_update(
                index_elements=keys, set_={k: stmt.excluded[k] for k in row if k not in keys}
            )
        )
        _adopt_pod_uid_allocations(session, job=j)
        if j.end_ts is not None:
            _close_allocations(session, job=j)


def _adopt_pod_uid_allocations(session: Session, *, job: Job) -> None:
    uid = job.payload.get("uid") if job.scheduler is Scheduler.KUBERNETES else None
    if not isinstance(uid, str) or uid == job.job_id:
        return
    # A node agent knows a pod only by its UID (cgroup path); what it stored before the
    # pod was seen joins the pod now. A row already under the pod's id for that GPU wins.
    a, other = t.allocations, t.allocations.alias("other")
    taken = (
        select(other.c.id)
        .where(
            other.c.scheduler == a.c.scheduler,
            other.c.job_id == job.job_id,
            other.c.node == a.c.node,
            other.c.gpu_index == a.c.gpu_index,
        )
        .exists()
    )
    session.execute(
        update(a)
        .where(a.c.scheduler == job.scheduler.value, a.c.job_id == uid, ~taken)
        .values(job_id=job.job_id)
    )


def _close_allocations(session: Session, *, job: Job) -> None:
    # A job that ended while nobody watched (server down, GPU indices gone from the scheduler)
    # must not hold its GPUs forever: its end closes every allocation still open.
    a = t.allocations
    session.execute(
        update(a)
        .where(a.c.scheduler == job.scheduler.value, a.c.job_id == job.job_id, a.c.end_ts.is_(None))
        .values(end_ts=job.end_ts)
    )


def patch_jobs(session: Session, *, patches: Iterable[JobPatch]) -> int:
    """Fill the fields a patch sets on jobs already stored; returns rows changed.

    Patches that set the same fields go in one executemany: 50,000 single UPDATEs held the
    SQLite writer for tens of seconds (issue #8).
    """
    groups: dict[tuple[tuple[str, ...], bool], list[dict[str, Any]]] = {}
    for p in patches:
        values = p.model_dump(exclude={"job_id", "scheduler"}, exclude_none=True)
        if not values:
            continue
        row = {f"b_{k}": v for k, v in values.items()} | {"b_job_id": p.job_id}
        if p.scheduler is not None:
            row["b_scheduler"] = p.scheduler.value
        groups.setdefault((tuple(sorted(values)), p.scheduler is not None), []).append(row)
    changed = 0
    for (fields, by_scheduler), rows in groups.items():
        stmt = (
            update(t.jobs)
            .where(t.jobs.c.job_id == bindparam("b_job_id"))
            .values({f: bindparam(f"b_{f}") for f in fields})
        )
        if by_scheduler:
            stmt = stmt.where(t.jobs.c.scheduler == bindparam("b_scheduler"))
        result = cast(CursorResult[Any], session.execute(stmt, rows))
        changed += max(result.rowcount or 0, 0)
    return changed


def upsert_allocations(session: Session, *, allocations: Iterable[Allocation]) -> None:
    """Record that jobs hold GPUs; a repeat observation keeps the first start, takes a new end.

    A pod named by its UID (as a node agent knows it) is stored under the pod's job id when
    that pod is known; otherwise under the UID until the pod arrives (see upsert_jobs).
    """
    allocations = list(allocations)
    uids = {a.job_id for a in allocations if a.scheduler is Scheduler.KUBERNETES}
    aliases = resolve_job_alias(session, scheduler=Scheduler.KUBERNETES, job_ids=uids)
    for a in allocations:
        row = a.model_dump(mode="json")
        if a.scheduler is Scheduler.KUBERNETES:
            row["job_id"] = aliases.get(a.job_id, a.job_id)
        if row["gpu_index"] is None:
            row["gpu_index"] = -1
        stmt = upsert_insert(session, t.allocations).values(**row)
        excluded = stmt.excluded
        session.execute(
            stmt.on_conflict_do_update(
                index_elements=["scheduler", "job_id", "node", "gpu_index"],
                set_={
                    "end_ts": excluded.end_ts,
                    "gpu_uuid": func.coalesce(excluded.gpu_uuid, t.allocations.c.gpu_uuid),
                    "start_ts": func.min(t.allocations.c.start_ts, excluded.start_ts)
                    if session.get_bind().dialect.name == "sqlite"
                    else func.least(t.allocations.c.start_ts, excluded.start_ts),
                },
            )
        )


def resolve_job_alias(
    session: Session, *, scheduler: Scheduler, job_ids: Iterable[str]
) -> dict[str, str]:
    """The stored job id of each alias a node knows a job by (pod UID -> namespace/name)."""
    wanted = sorted({j for j in job_ids if "/" not in j})  # namespace/name is already the id
    if not wanted:
        return {}
    uid = t.jobs.c.payload["uid"].as_string()
    stmt = select(uid.label("alias"), t.jobs.c.job_id).where(
        t.jobs.c.scheduler == scheduler.value, uid.in_(wanted)
    )
    return {r.alias: r.job_id for r in session.execute(stmt)}


def record_heartbeat(session: Session, *, server: str, now: float) -> None:
    """Note that a server process could write just now (the readiness probe's real write)."""
    stmt = upsert_insert(session, t.server_heartbeats).values(server=server[:255], ts=now)
    session.execute(stmt.on_conflict_do_update(index_elements=["server"], set_={"ts": now}))
