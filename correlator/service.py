"""Store functions for incidents, idle findings and correlator state; callers commit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Select, bindparam, func, select, update
from sqlalchemy.orm import Session

from correlator import tables as ct
from correlator.models import IdleFinding, IdleTotal, Incident, IncidentState
from correlator.sql import among
from correlator.taxonomy import Blame
from timeline.errors import NotFound
from timeline.fleet import Failing, FailingSet

_INCIDENT_COLS = [c.name for c in ct.incidents.columns if c.name != "id"]
_IDLE_COLS = [c.name for c in ct.idle_findings.columns if c.name != "id"]


def _incident_row(incident: Incident) -> dict[str, Any]:
    row = {k: getattr(incident, k) for k in _INCIDENT_COLS}
    row["state"] = incident.state.value
    row["affected_jobs"] = [j.model_dump() for j in incident.affected_jobs]
    return row


def get_state(session: Session, *, name: str) -> Any:
    """A persisted correlator value (cursor, last run times), or None."""
    stmt = select(ct.correlator_state.c.value).where(ct.correlator_state.c.name == name)
    return session.execute(stmt).scalar_one_or_none()


def get_states(session: Session, *, names: Sequence[str]) -> dict[str, Any]:
    """Several persisted correlator values in one query (absent names are left out)."""
    tbl = ct.correlator_state
    stmt = select(tbl.c.name, tbl.c.value).where(tbl.c.name.in_(list(names)))
    return {name: value for name, value in session.execute(stmt).all()}


def set_state(session: Session, *, name: str, value: Any, now: float) -> None:
    """Persist a correlator value."""
    tbl = ct.correlator_state
    done = session.execute(
        update(tbl).where(tbl.c.name == name).values(value=value, updated_ts=now)
    )
    if done.rowcount == 0:  # type: ignore[attr-defined]
        session.execute(tbl.insert().values(name=name, value=value, updated_ts=now))


def open_incidents(session: Session) -> list[Incident]:
    """Every open incident (they are few: incidents end when their condition clears)."""
    stmt = select(ct.incidents).where(ct.incidents.c.state == IncidentState.OPEN.value)
    return [Incident.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def _max_occurrences(session: Session, fingerprints: set[str]) -> dict[str, int]:
    tbl, fps, out = ct.incidents, sorted(fingerprints), {}
    for i in range(0, len(fps), 5000):
        stmt = (
            select(tbl.c.fingerprint, func.max(tbl.c.occurrence))
            .where(among(session, tbl.c.fingerprint, fps[i : i + 5000]))
            .group_by(tbl.c.fingerprint)
        )
        out.update({fp: int(n) for fp, n in session.execute(stmt).all()})
    return out


def save_incidents(session: Session, *, incidents: Sequence[Incident], now: float) -> None:
    """Update stored incidents, then insert new ones (id None), each in one executemany."""
    new = [i for i in incidents if i.id is None]
    updates = []
    for inc in incidents:
        inc.updated_ts = now
        if inc.id is not None:
            updates.append({f"b_{k}": v for k, v in _incident_row(inc).items()} | {"_id": inc.id})
    if updates:
        upd = (
            update(ct.incidents)
            .where(ct.incidents.c.id == bindparam("_id"))
            .values({c: bindparam(f"b_{c}") for c in _INCIDENT_COLS})
        )
        session.execute(upd, updates)
    if not new:
        return
    occurrences = _max_occurrences(session, {i.fingerprint for i in new})
    for inc in new:
        inc.occurrence = occurrences[inc.fingerprint] = occurrences.get(inc.fingerprint, 0) + 1
    stmt = ct.incidents.insert().returning(ct.incidents.c.id, sort_by_parameter_order=True)
    ids = session.execute(stmt, [_incident_row(i) for i in new]).scalars().all()
    for inc, new_id in zip(new, ids, strict=True):
        inc.id = int(new_id)


def upsert_incident(session: Session, *, incident: Incident, now: float) -> Incident:
    """Store an incident; a new one whose fingerprint is already open replaces that open row."""
    if incident.id is None:
        stmt = select(ct.incidents.c.id, ct.incidents.c.occurrence).where(
            ct.incidents.c.fingerprint == incident.fingerprint,
            ct.incidents.c.state == IncidentState.OPEN.value,
        )
        existing = session.execute(stmt).first()
        if existing is not None:
            incident.id, incident.occurrence = int(existing[0]), int(existing[1])
    save_incidents(session, incidents=[incident], now=now)
    return incident


def resolve_incident(
    session: Session, *, incident_id: int, ts: float, resolution: str, now: float
) -> None:
    """Mark an incident resolved at `ts` (event time) with a reason; a resolved one is left be."""
    tbl = ct.incidents
    session.execute(
        update(tbl)
        .where(tbl.c.id == incident_id, tbl.c.state == IncidentState.OPEN.value)
        .values(
            state=IncidentState.RESOLVED.value,
            resolved_ts=ts,
            resolution=resolution,
            updated_ts=now,
        )
    )


def get_incident(session: Session, *, incident_id: int) -> Incident:
    """One incident by id; NotFound when there is none."""
    row = session.execute(select(ct.incidents).where(ct.incidents.c.id == incident_id)).first()
    if row is None:
        raise NotFound(f"no incident {incident_id}")
    return Incident.model_validate(dict(row._mapping))


def list_incidents(
    session: Session,
    *,
    state: str | None = None,
    category: str | None = None,
    node: str | None = None,
    job_id: str | None = None,
    updated_since: float | None = None,
    limit: int = 200,
) -> list[Incident]:
    """Incidents, most recently seen first, optionally filtered (updated_since: wall clock of
    the last write, for consumers such as the healer that poll for changes)."""
    tbl = ct.incidents
    stmt = select(tbl).order_by(tbl.c.last_seen_ts.desc(), tbl.c.id.desc()).limit(limit)
    if updated_since is not None:
        stmt = stmt.where(tbl.c.updated_ts > updated_since)
    if state is not None:
        stmt = stmt.where(tbl.c.state == state)
    if category is not None:
        stmt = stmt.where(tbl.c.category == category)
    if node is not None:
        stmt = stmt.where(tbl.c.culprit_node == node)
    rows = [Incident.model_validate(dict(r)) for r in session.execute(stmt).mappings()]
    if job_id is not None:  # affected_jobs is JSON: filter here, portable across backends
        rows = [r for r in rows if r.job_id == job_id or job_id in r.job_ids()]
    return rows


def open_idle_findings(session: Session) -> list[IdleFinding]:
    """Every open idle finding."""
    stmt = select(ct.idle_findings).where(ct.idle_findings.c.state == IncidentState.OPEN.value)
    return [IdleFinding.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def save_idle_findings(session: Session, *, findings: Iterable[IdleFinding], now: float) -> None:
    """Insert new idle findings and update stored ones."""
    updates = []
    for f in findings:
        f.updated_ts = now
        row = f.model_dump(mode="json", exclude={"id"})
        if f.id is None:
            stmt = ct.idle_findings.insert().values(**row).returning(ct.idle_findings.c.id)
            f.id = int(session.execute(stmt).scalar_one())
        else:
            updates.append({f"b_{k}": row[k] for k in _IDLE_COLS} | {"_id": f.id})
    if updates:
        upd = (
            update(ct.idle_findings)
            .where(ct.idle_findings.c.id == bindparam("_id"))
            .values({c: bindparam(f"b_{c}") for c in _IDLE_COLS})
        )
        session.execute(upd, updates)


def list_idle_findings(
    session: Session,
    *,
    state: str | None = None,
    seen_since: float | None = None,
    limit: int = 500,
) -> list[IdleFinding]:
    """Idle findings, most wasteful first (seen_since: idle at some point after this time)."""
    tbl = ct.idle_findings
    stmt = select(tbl).order_by(tbl.c.gpu_hours.desc(), tbl.c.id).limit(limit)
    if state is not None:
        stmt = stmt.where(tbl.c.state == state)
    if seen_since is not None:
        stmt = stmt.where(tbl.c.last_seen_ts >= seen_since)
    return [IdleFinding.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def idle_totals(session: Session, *, by: str, state: str | None = None) -> list[IdleTotal]:
    """Idle GPU-hours and cost per job, user or account (Slurm account / K8s namespace)."""
    if by not in ("job_id", "user", "account"):
        raise ValueError(f"cannot group idle findings by {by!r}")
    tbl = ct.idle_findings
    key = tbl.c[by]
    stmt = (
        select(
            key.label("key"),
            func.count(func.distinct(tbl.c.gpu_uuid)).label("gpus"),
            func.sum(tbl.c.gpu_hours).label("gpu_hours"),
            func.sum(tbl.c.cost).label("cost"),
        )
        .group_by(key)
        .order_by(func.sum(tbl.c.gpu_hours).desc())
    )
    if state is not None:
        stmt = stmt.where(tbl.c.state == state)
    return [IdleTotal.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def power_profiles(session: Session, *, gpu_uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Learned idle/max power per GPU."""
    uuids = list(gpu_uuids)
    if not uuids:
        return {}
    tbl = ct.gpu_power_profiles
    stmt = select(tbl).where(among(session, tbl.c.gpu_uuid, uuids))
    return {r["gpu_uuid"]: dict(r) for r in session.execute(stmt).mappings()}


def save_power_profiles(
    session: Session,
    *,
    profiles: Iterable[dict[str, Any]],
    stored: Mapping[str, Mapping[str, Any]],
    now: float,
) -> None:
    """Insert new power profiles and update changed ones (`stored`: as power_profiles read
    them); `updated_ts` is when a profile last changed."""
    # Rewriting every GPU's unchanged profile each hang check cost the server ~8% of its CPU
    # with 40k GPUs under bench scale (py-spy); a learned profile rarely changes.
    tbl = ct.gpu_power_profiles
    new: list[dict[str, Any]] = []
    old: list[dict[str, Any]] = []
    keys = ("idle_w", "max_w", "limit_w")
    for p in profiles:
        row = {k: p.get(k) for k in ("gpu_uuid", *keys)}
        row["updated_ts"] = now
        held = stored.get(str(row["gpu_uuid"]))
        if held is None:
            new.append(row)
        elif any(held.get(k) != row[k] for k in keys):
            old.append(row)
    if new:
        session.execute(tbl.insert(), new)
    if old:
        stmt = (
            update(tbl)
            .where(tbl.c.gpu_uuid == bindparam("_uuid"))
            .values({c: bindparam(f"b_{c}") for c in ("idle_w", "max_w", "limit_w", "updated_ts")})
        )
        session.execute(
            stmt, [{f"b_{k}": v for k, v in r.items()} | {"_uuid": r["gpu_uuid"]} for r in old]
        )


def _open_node_blamed() -> Select[Any]:
    # Open incidents that blame a machine and name its node: all that "failing" is made of.
    tbl = ct.incidents
    return (
        select(tbl)
        .where(tbl.c.state == IncidentState.OPEN.value, tbl.c.blame == Blame.NODE.value)
        .where(tbl.c.culprit_node.is_not(None))
    )


def failing_set(session: Session) -> FailingSet:
    """GPUs and nodes that an open incident blames (blame "node"): what "failing" means.

    A user's own fault (blame "job", e.g. an Xid 31 from an illegal memory access) marks nothing.
    """
    tbl = ct.incidents
    stmt = (
        _open_node_blamed()
        .with_only_columns(
            tbl.c.id,
            tbl.c.title,
            tbl.c.culprit_node,
            tbl.c.culprit_gpu_uuid,
            tbl.c.culprit_pci_bus_id,
        )
        .order_by(tbl.c.last_seen_ts)
    )
    out = FailingSet()
    for inc_id, title, node, uuid, pci in session.execute(stmt).all():
        bad = Failing(reason=str(title), incident_id=int(inc_id))
        if uuid:
            out.gpus[uuid] = bad
        if pci:
            out.gpus[f"{node}|{pci}"] = bad
        if not uuid and not pci:
            out.nodes[node] = bad
    return out


def blamed_nodes(session: Session) -> set[str]:
    """The nodes of failing_set: each open incident's culprit node, whole node or one GPU."""
    stmt = _open_node_blamed().with_only_columns(ct.incidents.c.culprit_node).distinct()
    return set(session.execute(stmt).scalars())
