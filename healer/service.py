"""Store functions of the healer (keyword-only, on a Session; callers commit).

Every function that changes an action's state takes `fence` and calls it inside the same
transaction before returning: a process that is no longer the leader raises there, and the
caller's unit of work rolls the change back (issue #13 provides the callable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from correlator import tables as ct
from correlator.models import Incident
from healer import tables as ht
from healer.models import (
    TERMINAL,
    Action,
    ActionCount,
    ActionMode,
    ActionState,
    AuditEntry,
    BreakerState,
    HeldNode,
    Lineage,
    Notice,
)
from timeline.db import upsert_insert
from timeline.errors import Conflict, NotFound

Fence = Callable[[Session], None] | None
_ACTION_COLS = [c.name for c in ht.actions.columns if c.name != "id"]
BREAKER = "breaker"
_MAX_TEXT = 16_000  # command output kept per audit row


def _fenced(session: Session, fence: Fence) -> None:
    if fence is not None:
        fence(session)


def _action(row: Any) -> Action:
    return Action.model_validate(dict(row))


# --- actions ---


def insert_action(session: Session, *, action: Action, now: float, fence: Fence = None) -> bool:
    """Store a planned action unless one with its key exists; True when it is new (id set)."""
    row = action.model_dump(mode="json", exclude={"id"})
    row.update(created_ts=now, updated_ts=now)
    stmt = (
        upsert_insert(session, ht.actions)
        .values(**row)
        .on_conflict_do_nothing(index_elements=["key"])
        .returning(ht.actions.c.id)
    )
    new_id = session.execute(stmt).scalar_one_or_none()
    if new_id is None:
        return False
    action.id, action.created_ts, action.updated_ts = int(new_id), now, now
    _fenced(session, fence)
    return True


def get_action(session: Session, *, action_id: int) -> Action:
    """One action; NotFound when there is none."""
    row = session.execute(select(ht.actions).where(ht.actions.c.id == action_id)).mappings().first()
    if row is None:
        raise NotFound(f"no action {action_id}")
    return _action(row)


def action_by_key(session: Session, *, key: str) -> Action | None:
    """The action with this idempotency key, if any."""
    row = session.execute(select(ht.actions).where(ht.actions.c.key == key)).mappings().first()
    return None if row is None else _action(row)


def list_actions(
    session: Session,
    *,
    state: str | Sequence[str] | None = None,
    kind: str | None = None,
    node: str | None = None,
    job_id: str | None = None,
    incident_id: int | None = None,
    mode: str | None = None,
    limit: int = 200,
) -> list[Action]:
    """Actions, newest first, optionally filtered (state: one or several)."""
    a = ht.actions
    stmt = select(a).order_by(a.c.id.desc()).limit(limit)
    if state is not None:
        states = [state] if isinstance(state, str) else list(state)
        stmt = stmt.where(a.c.state.in_(states))
    for col, value in (
        (a.c.kind, kind),
        (a.c.node, node),
        (a.c.job_id, job_id),
        (a.c.incident_id, incident_id),
        (a.c.mode, mode),
    ):
        if value is not None:
            stmt = stmt.where(col == value)
    return [_action(r) for r in session.execute(stmt).mappings()]


def live_actions(session: Session, *, now: float) -> list[Action]:
    """Actions that may take a step now: running, approved, or planned to act, oldest first."""
    a = ht.actions
    ready = or_(
        a.c.state.in_([ActionState.RUNNING.value, ActionState.APPROVED.value]),
        (a.c.state == ActionState.PLANNED.value) & (a.c.mode == ActionMode.ACT.value),
    )
    due = or_(a.c.not_before_ts.is_(None), a.c.not_before_ts <= now)
    stmt = select(a).where(ready, due).order_by(a.c.id)
    return [_action(r) for r in session.execute(stmt).mappings()]


def transition(
    session: Session,
    *,
    action_id: int,
    to: ActionState,
    from_states: Iterable[ActionState],
    now: float,
    fence: Fence = None,
    **fields: Any,
) -> Action:
    """Move an action to `to` when it is in one of `from_states`; Conflict otherwise."""
    allowed = [s.value for s in from_states]
    values = {k: v for k, v in fields.items() if k in _ACTION_COLS}
    values.update(state=to.value, updated_ts=now)
    if to is ActionState.RUNNING:
        values.setdefault("started_ts", now)
    if to in TERMINAL:
        values.setdefault("finished_ts", now)
    a = ht.actions
    done = session.execute(
        update(a).where(a.c.id == action_id, a.c.state.in_(allowed)).values(**values)
    )
    if done.rowcount == 0:  # type: ignore[attr-defined]
        current = get_action(session, action_id=action_id)  # NotFound when it does not exist
        raise Conflict(
            f"action {action_id} is {current.state.value}; cannot make it {to.value} "
            f"(only from {', '.join(allowed)})"
        )
    _fenced(session, fence)
    return get_action(session, action_id=action_id)


def save_progress(
    session: Session,
    *,
    action_id: int,
    now: float,
    params: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
    not_before_ts: float | None = None,
    fence: Fence = None,
) -> None:
    """Persist what a running action learned or did so far (its next step reads it back)."""
    values: dict[str, Any] = {"updated_ts": now, "not_before_ts": not_before_ts}
    if params is not None:
        values["params"] = params
    if result is not None:
        values["result"] = result
    session.execute(update(ht.actions).where(ht.actions.c.id == action_id).values(**values))
    _fenced(session, fence)


def approve(
    session: Session, *, action_id: int, by: str, now: float, fence: Fence = None
) -> Action:
    """An admin approves a planned action that waits for approval (or is only proposed)."""
    action = get_action(session, action_id=action_id)
    if action.mode is ActionMode.OBSERVE and action.state is ActionState.PLANNED:
        raise Conflict(
            f"action {action_id} is in observe mode: acting is switched off for this "
            f"{action.kind.value} on {action.cluster}; switch it on in the policy"
        )
    moved = transition(
        session,
        action_id=action_id,
        to=ActionState.APPROVED,
        from_states=[ActionState.PLANNED],
        now=now,
        fence=fence,
        approved_by=by,
    )
    add_audit(session, entry=_state_note(moved, by, f"approved by {by}", now))
    return moved


def reject(session: Session, *, action_id: int, by: str, now: float, fence: Fence = None) -> Action:
    """An admin rejects a planned or approved action: it is cancelled and never runs."""
    moved = transition(
        session,
        action_id=action_id,
        to=ActionState.CANCELLED,
        from_states=[ActionState.PLANNED, ActionState.APPROVED],
        now=now,
        fence=fence,
        error=f"rejected by {by}",
    )
    add_audit(session, entry=_state_note(moved, by, f"rejected by {by}", now))
    return moved


def _state_note(action: Action, actor: str, text: str, now: float) -> AuditEntry:
    return AuditEntry(
        action_id=action.id, ts=now, actor=actor, what="state", output=text, approved_by=actor
    )


def action_counts(session: Session) -> list[ActionCount]:
    """Actions per (kind, state): fleetmedic_healer_actions_total{action,result}."""
    a = ht.actions
    stmt = select(a.c.kind, a.c.state, func.count()).group_by(a.c.kind, a.c.state)
    rows = session.execute(stmt.order_by(a.c.kind, a.c.state)).all()
    return [ActionCount(action=k, result=s, count=int(n)) for k, s, n in rows]


# --- audit ---


def add_audit(session: Session, *, entry: AuditEntry) -> None:
    """Record one command, API call or state change."""
    row = entry.model_dump(mode="json", exclude={"id"})
    row["output"], row["error"] = row["output"][-_MAX_TEXT:], row["error"][-_MAX_TEXT:]
    session.execute(ht.audit.insert().values(**row))


def list_audit(session: Session, *, action_id: int) -> list[AuditEntry]:
    """The audit of one action, oldest first."""
    a = ht.audit
    stmt = select(a).where(a.c.action_id == action_id).order_by(a.c.id)
    return [AuditEntry.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


# --- lineage ---


def add_lineage(session: Session, *, lineage: Lineage) -> None:
    """Record that a job runs again (idempotent per action)."""
    row = lineage.model_dump(mode="json", exclude={"id"})
    stmt = upsert_insert(session, ht.lineage).values(**row).on_conflict_do_nothing()
    session.execute(stmt)


def job_lineage(session: Session, *, job_id: str) -> list[Lineage]:
    """Every lineage link reaching this job, back to the first run and on to the newest."""
    ln, seen, todo, out = ht.lineage, set(), [job_id], {}
    while todo:
        jid = todo.pop()
        if jid in seen:
            continue
        seen.add(jid)
        stmt = select(ln).where(or_(ln.c.old_job_id == jid, ln.c.new_job_id == jid))
        for r in session.execute(stmt).mappings():
            link = Lineage.model_validate(dict(r))
            out[link.id] = link
            todo += [link.old_job_id, link.new_job_id]
    return sorted(out.values(), key=lambda x: (x.ts, x.id or 0))


def lineage_root(session: Session, *, job_id: str) -> str:
    """The first job of a chain of resubmissions (a requeued job is its own root)."""
    links = {x.new_job_id: x.old_job_id for x in job_lineage(session, job_id=job_id)}
    root, hops = job_id, 0
    while root in links and links[root] != root and hops < 1000:
        root, hops = links[root], hops + 1
    return root


# --- notices ---


def add_notice(session: Session, *, notice: Notice) -> bool:
    """Queue a message for a person unless one with its key exists; True when new."""
    row = notice.model_dump(mode="json", exclude={"id"})
    stmt = (
        upsert_insert(session, ht.notices)
        .values(**row)
        .on_conflict_do_nothing(index_elements=["key"])
        .returning(ht.notices.c.id)
    )
    return session.execute(stmt).scalar_one_or_none() is not None


def list_notices(
    session: Session, *, unsent: bool = False, incident_id: int | None = None, limit: int = 200
) -> list[Notice]:
    """Messages for people, oldest first (unsent: what the notifier still has to send)."""
    n = ht.notices
    stmt = select(n).order_by(n.c.id).limit(limit)
    if unsent:
        stmt = stmt.where(n.c.sent_ts.is_(None))
    if incident_id is not None:
        stmt = stmt.where(n.c.incident_id == incident_id)
    return [Notice.model_validate(dict(r)) for r in session.execute(stmt).mappings()]


def mark_notice_sent(session: Session, *, notice_id: int, ts: float) -> None:
    """The notifier sent this message."""
    session.execute(update(ht.notices).where(ht.notices.c.id == notice_id).values(sent_ts=ts))


# --- state: cursor, breaker ---


def get_state(session: Session, *, name: str) -> Any:
    """A persisted healer value, or None."""
    stmt = select(ht.state.c.value).where(ht.state.c.name == name)
    return session.execute(stmt).scalar_one_or_none()


def set_state(session: Session, *, name: str, value: Any, now: float) -> None:
    """Persist a healer value."""
    done = session.execute(
        update(ht.state).where(ht.state.c.name == name).values(value=value, updated_ts=now)
    )
    if done.rowcount == 0:  # type: ignore[attr-defined]
        session.execute(ht.state.insert().values(name=name, value=value, updated_ts=now))


def get_breaker(session: Session) -> BreakerState:
    """The blast-radius breaker as persisted (closed when never tripped)."""
    return BreakerState.model_validate(get_state(session, name=BREAKER) or {})


def set_breaker(
    session: Session, *, breaker: BreakerState, now: float, fence: Fence = None
) -> None:
    """Persist the breaker (a trip or a reset)."""
    set_state(session, name=BREAKER, value=breaker.model_dump(mode="json"), now=now)
    _fenced(session, fence)


# --- derived views ---


def held_nodes(session: Session) -> list[HeldNode]:
    """Nodes we took out and still hold (drained by us, not returned, not released)."""
    a = ht.actions
    stmt = select(a).where(a.c.kind == "drain", a.c.state == ActionState.DONE.value)
    out = []
    for action in (_action(r) for r in session.execute(stmt.order_by(a.c.id)).mappings()):
        if not action.result.get("holding"):
            continue
        out.append(
            HeldNode(
                scheduler=action.scheduler or "",
                cluster=action.cluster,
                node=action.node or "",
                drain_action_id=int(action.id or 0),
                incident_id=action.incident_id,
                since_ts=action.finished_ts,
                reason=action.reason,
                support=action.result.get("support"),
            )
        )
    return out


def incidents_updated_since(session: Session, *, since: float, limit: int = 500) -> list[Incident]:
    """Incident rows written after `since` (wall clock), oldest write first."""
    i = ct.incidents
    stmt = select(i).where(i.c.updated_ts > since).order_by(i.c.updated_ts, i.c.id).limit(limit)
    return [Incident.model_validate(dict(r)) for r in session.execute(stmt).mappings()]
