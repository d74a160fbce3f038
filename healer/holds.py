"""The nodes we hold: notice when a person takes one back, and plan returns to service.

Ownership: a node we drained that a person resumed (or re-drained with a reason of their own)
is theirs again. Our workflow for it is cancelled (pending returns and resets) and our marks
come off (the Kubernetes taint and annotations), so nothing of ours is left behind.
"""

from __future__ import annotations

from healer import service
from healer.audit import Audit
from healer.flows import _audit_sink, _note, _release
from healer.models import Action, ActionKind, ActionState, HealReport
from healer.steps import HealerContext
from timeline.db import unit_of_work

_PENDING = (ActionState.PLANNED, ActionState.APPROVED, ActionState.RUNNING)


def _return_action(ctx: HealerContext, drain: Action) -> Action:
    mode = ctx.policy.mode_for(
        kind=ActionKind.RETURN,
        cluster=drain.cluster,
        partition=drain.partition,
        confidence=1.0,
        rule=None,
    )
    return Action(
        key=f"return:{drain.cluster}:{drain.node}:d{drain.id}",
        kind=ActionKind.RETURN,
        mode=mode,
        scheduler=drain.scheduler,
        cluster=drain.cluster,
        partition=drain.partition,
        node=drain.node,
        incident_id=drain.incident_id,
        reason=f"validate {drain.node} and put it back in service once its fault has stopped",
        params={"drain_action_id": drain.id},
    )


def _cancel_for_node(ctx: HealerContext, node: str, cluster: str, why: str, now: float) -> None:
    with unit_of_work(ctx.factory) as s:
        for a in service.list_actions(s, node=node, state=[x.value for x in _PENDING]):
            if a.cluster != cluster or a.kind not in (ActionKind.RETURN, ActionKind.RESET_GPU):
                continue
            service.transition(
                s,
                action_id=int(a.id or 0),
                to=ActionState.CANCELLED,
                from_states=_PENDING,
                now=now,
                fence=ctx.fence,
                error=why,
            )


def reconcile(ctx: HealerContext, *, report: HealReport) -> None:
    """Check each node we hold against its scheduler; release or plan its return."""
    with ctx.factory() as s:
        held = service.held_nodes(s)
    for h in held:
        actor = ctx.actors.get(h.scheduler)
        if actor is None:
            continue
        now = ctx.clock()
        with ctx.factory() as s:
            drain = service.get_action(s, action_id=h.drain_action_id)
        # Checks of a hold are the healer's own, not part of what an admin approved.
        audit = Audit(
            action_id=drain.id, sink=_audit_sink(ctx), clock=ctx.clock, actor="healer:reconcile"
        )
        st = actor.node(h.node, audit)
        if st.exists and (not st.out or not st.ours):
            who = "resumed by a person" if not st.out else f"taken over by a person ({st.reason})"
            if not st.out:
                actor.clean_up(h.node, audit)
            _cancel_for_node(ctx, h.node, h.cluster, f"{h.node} was {who}", now)
            with unit_of_work(ctx.factory) as s:
                _release(s, ctx, drain, how=who, now=now)
                service.add_audit(s, entry=_note(drain, f"released: {who}", now))
            report.released += 1
            continue
        if h.support or not ctx.policy.validation_command:
            continue  # stays out for a person (or no validation is configured: never returned)
        with unit_of_work(ctx.factory) as s:
            ret = _return_action(ctx, drain)
            if service.insert_action(s, action=ret, now=now, fence=ctx.fence):
                report.planned += 1
