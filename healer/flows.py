"""The healer's transaction owner: plan actions from incidents, take their steps, reconcile the
nodes it holds. The persisted state machine is planned -> approved -> running -> done | failed
| cancelled; every state change is fenced (the caller's `fence`) inside its transaction.

Exactly once across SIGKILL: an action is `running` before its first call; a process that dies
mid-step leaves it `running`, and the next pass runs the step again, which first checks whether
its change is already in place (healer/slurm.py, healer/kubernetes.py) and never repeats it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy.orm import Session

from correlator import service as incidents
from healer import safety, service
from healer.audit import Audit
from healer.models import (
    Action,
    ActionKind,
    ActionMode,
    ActionState,
    AuditEntry,
    HealReport,
    Lineage,
    StepOutcome,
)
from healer.notify import oncall_alert
from healer.planner import Planner
from healer.steps import HealerContext, Steps
from timeline.db import unit_of_work

log = logging.getLogger(__name__)

CURSOR = "incidents_cursor"  # wall clock of the newest incident write planned from
_OVERLAP_S = 10.0  # re-read this much before the cursor: writes commit after their timestamp
_WAITING = (ActionState.PLANNED, ActionState.APPROVED)


def plan_once(ctx: HealerContext, *, report: HealReport) -> None:
    """Plan actions for incidents written since the cursor; cancel what waits on resolved ones."""
    now = ctx.clock()
    with unit_of_work(ctx.factory) as s:
        cursor = float(service.get_state(s, name=CURSOR) or 0.0)
        changed = service.incidents_updated_since(s, since=cursor - _OVERLAP_S)
        if not changed:
            return
        report.incidents_read += len(changed)
        planner = Planner(s, policy=ctx.policy, breaker=service.get_breaker(s), now=now)
        for inc in changed:
            if inc.state.value != "open":
                report.cancelled += _cancel_waiting(s, incident_id=inc.id, now=now, fence=ctx.fence)
                continue
            for action in planner.plan(inc):
                if service.insert_action(s, action=action, now=now, fence=ctx.fence):
                    report.planned += 1
                    service.add_audit(s, entry=_note(action, f"planned ({action.mode.value})", now))
        service.set_state(s, name=CURSOR, value=max(i.updated_ts for i in changed), now=now)


def _note(action: Action, text: str, now: float, actor: str = "healer") -> AuditEntry:
    return AuditEntry(
        action_id=action.id,
        ts=now,
        actor=actor,
        what="state",
        output=text,
        approved_by=action.approved_by,
    )


def _cancel_waiting(s: Session, *, incident_id: int | None, now: float, fence: Any) -> int:
    """Actions still waiting for a person when their incident resolved are cancelled."""
    n = 0
    for a in service.list_actions(s, incident_id=incident_id, state=[x.value for x in _WAITING]):
        if a.mode is ActionMode.ACT and a.state is ActionState.PLANNED:
            continue  # it runs in this pass anyway
        service.transition(
            s,
            action_id=int(a.id or 0),
            to=ActionState.CANCELLED,
            from_states=_WAITING,
            now=now,
            fence=fence,
            error="incident resolved before it ran",
        )
        n += 1
    return n


# --- taking steps ---


def _blocked(s: Session, action: Action) -> str | None:
    """Why this action does not run this pass yet (it waits for its incident's drain)."""
    if action.kind in (ActionKind.RECOVER, ActionKind.NOTIFY) and action.incident_id:
        first = (ActionKind.DRAIN, ActionKind.RESET_GPU)
        for other in service.list_actions(s, incident_id=action.incident_id):
            if (
                other.kind in first
                and not other.terminal
                and (other.mode is ActionMode.ACT or other.state is not ActionState.PLANNED)
            ):
                return "waits for the incident's drain"
    return None


def _gate(ctx: HealerContext, s: Session, action: Action, now: float) -> StepOutcome | None:
    """Safety checks before the first call: breaker for drains, budget for recoveries."""
    policy = ctx.policy
    if action.kind is ActionKind.DRAIN and action.state is not ActionState.RUNNING:
        why = safety.breaker_blocks(s, policy=policy, action=action, now=now)
        if why is not None:
            out = StepOutcome("cancelled", {}, why)
            if safety.trip(s, reason=why, scope=action.cluster, now=now, fence=ctx.fence):
                out.notices.append(
                    oncall_alert(
                        key=f"breaker:{now:.3f}",
                        subject="blast-radius breaker tripped",
                        body=f"{why}. New drains stop until an admin resets the breaker "
                        "(fleetmedic heal status; POST /api/v1/healer/breaker/reset). Returning "
                        "healthy nodes still works.",
                        oncall=policy.oncall,
                        now=now,
                        action=action,
                    )
                )
            return out
    if action.kind is ActionKind.RECOVER and action.state is not ActionState.RUNNING:
        limit = action.params.get("max_recoveries")
        why, until = safety.recovery_gate(s, policy=policy, action=action, limit=limit, now=now)
        if why is not None:
            out = StepOutcome("cancelled", {}, why)
            out.notices.append(
                oncall_alert(
                    key=f"budget:{action.id}",
                    subject=f"job {action.job_id} not recovered again",
                    body=f"{why}. Escalated to a person.",
                    oncall=policy.oncall,
                    now=now,
                    action=action,
                )
            )
            return out
        if until is not None:
            return StepOutcome.wait(until, note="backoff before recovering this job again")
    return None


def _claim(ctx: HealerContext, action: Action) -> tuple[Action | None, StepOutcome | None]:
    """In one transaction: approve (act mode), check dependencies and gates, mark running."""
    now = ctx.clock()
    with unit_of_work(ctx.factory) as s:
        current = service.get_action(s, action_id=int(action.id or 0))
        if current.terminal or _blocked(s, current):
            return None, None
        if current.state is ActionState.PLANNED:
            current = service.transition(
                s,
                action_id=int(current.id or 0),
                fence=ctx.fence,
                to=ActionState.APPROVED,
                from_states=[ActionState.PLANNED],
                now=now,
                approved_by="policy",
            )
        gated = _gate(ctx, s, current, now)
        if gated is not None and gated.status == "cancelled":
            _finish(ctx, s, current, gated, now)
            return None, gated
        if gated is not None:  # backoff
            service.save_progress(
                s,
                action_id=int(current.id or 0),
                now=now,
                not_before_ts=gated.retry_at,
                fence=ctx.fence,
            )
            return None, gated
        if current.state is ActionState.APPROVED:
            current = service.transition(
                s,
                action_id=int(current.id or 0),
                fence=ctx.fence,
                to=ActionState.RUNNING,
                from_states=[ActionState.APPROVED],
                now=now,
                attempts=current.attempts + 1,
            )
            service.add_audit(s, entry=_note(current, "running", now))
        return current, None


def _audit_sink(ctx: HealerContext) -> Any:
    def sink(entry: AuditEntry) -> None:
        with unit_of_work(ctx.factory) as s:  # committed at once: survives a kill right after
            service.add_audit(s, entry=entry)

    return sink


def _saver(ctx: HealerContext, action: Action) -> Any:
    def save(params: dict[str, Any]) -> None:
        with unit_of_work(ctx.factory) as s:
            service.save_progress(
                s, action_id=int(action.id or 0), now=ctx.clock(), params=params, fence=ctx.fence
            )

    return save


def step_action(ctx: HealerContext, action: Action) -> str:
    """Take one step of an action: 'done', 'failed', 'cancelled', 'wait' or 'skipped'."""
    claimed, early = _claim(ctx, action)
    if claimed is None:
        return early.status if early is not None else "skipped"
    audit = Audit(
        action_id=claimed.id,
        approved_by=claimed.approved_by,
        sink=_audit_sink(ctx),
        clock=ctx.clock,
    )
    try:
        outcome = Steps(ctx).run(claimed, audit, _saver(ctx, claimed))
    except Exception as exc:  # a bug must not wedge the healer: the action fails, visibly
        log.exception("healer: step of action %s failed", claimed.id)
        outcome = StepOutcome.failed(f"internal error: {type(exc).__name__}: {exc}")
    with unit_of_work(ctx.factory) as s:
        current = service.get_action(s, action_id=int(claimed.id or 0))
        _finish(ctx, s, current, outcome, ctx.clock())
    return outcome.status


def _finish(ctx: HealerContext, s: Session, action: Action, out: StepOutcome, now: float) -> None:
    """Persist a step's outcome with its notices, follow-ups, lineage and escalation."""
    aid = int(action.id or 0)
    for notice in out.notices:
        service.add_notice(s, notice=notice)
    for follow in out.follow_up:
        service.insert_action(s, action=follow, now=now, fence=ctx.fence)
    if out.status == "wait":
        waiting = {"waiting": out.result.get("note")} if out.result.get("note") else out.result
        service.save_progress(
            s,
            action_id=aid,
            now=now,
            not_before_ts=out.retry_at,
            result=action.result | waiting,
            fence=ctx.fence,
        )
        return
    result = {k: v for k, v in action.result.items() if k != "waiting"} | out.result
    if out.status == "done" and action.kind is ActionKind.DRAIN and result.get("already"):
        others = [h for h in service.held_nodes(s) if h.drain_action_id != aid]
        holder = next(
            (h for h in others if (h.node, h.cluster) == (action.node, action.cluster)), None
        )
        if holder is not None:  # another incident's drain holds it; one hold per node
            result |= {"holding": False, "noop": True, "held_by": holder.drain_action_id}
    if out.status == "done" and action.kind is ActionKind.DRAIN and result.get("holding"):
        if not result.get("already"):  # it was in service just now: older holds are stale
            _release(s, ctx, action, how="resumed by a person (found in service)", now=now)
        _escalate(s, ctx, action, result, now)
    if out.status == "done" and action.kind is ActionKind.RETURN:
        _release(s, ctx, action, how="returned", now=now)
    if out.status == "done" and result.get("how") in ("requeue", "resubmit", "recreate"):
        _lineage(s, action, result, now)
    to = {"done": ActionState.DONE, "failed": ActionState.FAILED}.get(
        out.status, ActionState.CANCELLED
    )
    service.transition(
        s,
        action_id=aid,
        to=to,
        from_states=[action.state],
        now=now,
        fence=ctx.fence,
        result=result,
        error=out.error,
    )
    service.add_audit(
        s, entry=_note(action, f"{to.value}" + (f": {out.error}" if out.error else ""), now)
    )


def _escalate(
    s: Session, ctx: HealerContext, action: Action, result: dict[str, Any], now: float
) -> None:
    """A node taken out too often (or one GPU failing again and again) stays out for a person."""
    inc = _incident(s, action.incident_id)
    why = safety.escalation(s, policy=ctx.policy, action=action, incident=inc, now=now)
    if why:
        result["support"] = why
        alert = oncall_alert(
            key=f"support:{action.id}",
            subject=f"{action.node} needs support",
            now=now,
            body=f"{action.node} stays out of service: {why}.",
            oncall=ctx.policy.oncall,
            action=action,
        )
        service.add_notice(s, notice=alert)


def _incident(s: Session, incident_id: int | None) -> Any:
    if incident_id is None:
        return None
    try:
        return incidents.get_incident(s, incident_id=incident_id)
    except Exception:
        return None


def _lineage(s: Session, action: Action, result: dict[str, Any], now: float) -> None:
    p = action.params
    service.add_lineage(
        s,
        lineage=Lineage(
            scheduler=action.scheduler or "",
            cluster=action.cluster,
            old_job_id=str(action.job_id),
            new_job_id=str(result.get("new_job_id")),
            how=str(result["how"]),
            action_id=action.id,
            incident_id=action.incident_id,
            checkpoint=p.get("checkpoint"),
            step=p.get("step"),
            wandb_run=p.get("wandb_run"),
            ts=now,
        ),
    )


def _release(s: Session, ctx: HealerContext, action: Action, *, how: str, now: float) -> None:
    """The node is no longer ours to hold (returned by us, or taken back by a person)."""
    for held in service.held_nodes(s):
        if held.node == action.node and held.cluster == action.cluster:
            drain = service.get_action(s, action_id=held.drain_action_id)
            result = drain.result | {"holding": False, "released": how, "released_ts": now}
            service.save_progress(
                s, action_id=held.drain_action_id, now=now, result=result, fence=ctx.fence
            )


def run_steps(ctx: HealerContext, *, report: HealReport, budget_s: float = 5.0) -> None:
    """Step every action that may move now, until nothing moves or the time budget is spent."""
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        with ctx.factory() as s:
            ready = service.live_actions(s, now=ctx.clock())
        moved = False
        for action in ready:
            status = step_action(ctx, action)
            if status == "skipped":
                continue
            report.steps += 1
            if status == "wait":
                report.waiting += 1
                continue
            moved = True
            setattr(report, status, getattr(report, status) + 1)
            if time.monotonic() >= deadline:
                return
        if not moved:
            return
