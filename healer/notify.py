"""Messages for people: one per incident to each job owner and to the on-call, saying what
happened and what was done, plus on-call alerts (breaker tripped, node needs support).

They are rows in healer_notices; the notifier (dashboard issue) sends them and marks them sent.
"""

from __future__ import annotations

from correlator.models import Incident
from healer.models import Action, ActionKind, ActionState, Notice

USER_FAULTS = frozenset({"user_code", "oom_gpu", "oom_host"})


def _did(action: Action) -> str:
    """One line on what an action did (or would do, or why it did not)."""
    r, what = action.result, action.kind
    if action.state is ActionState.PLANNED:
        return f"not done yet ({action.mode.value} mode): {action.reason}"
    if action.state is ActionState.CANCELLED:
        return f"not done: {action.error or 'cancelled'} ({action.reason})"
    if action.state is ActionState.FAILED:
        return f"failed: {action.error} ({action.reason})"
    if what is ActionKind.DRAIN:
        if r.get("noop"):
            return f"node {action.node} was already taken out by a person; left as it was"
        return f'node {action.node} was taken out of service ("{action.reason}")'
    if what is ActionKind.RESET_GPU:
        return f"the GPU on {action.node} was reset"
    if what is ActionKind.RECOVER:
        if r.get("noop"):
            return f"job {action.job_id} was not run again: {r.get('note')}"
        how = {"requeue": "requeued", "resubmit": "resubmitted", "recreate": "recreated"}
        line = f"job {action.job_id} was {how.get(str(r.get('how')), 'moved')}"
        if r.get("new_job_id") and r.get("new_job_id") != action.job_id:
            line += f" as {r['new_job_id']}"
        if action.params.get("exclude"):
            line += f", away from {', '.join(action.params['exclude'])}"
        ckpt = action.params.get("checkpoint")
        if ckpt:
            step = action.params.get("step")
            line += f"; it resumes from {ckpt}" + (f" (step {step})" if step is not None else "")
        else:
            line += "; no complete checkpoint was found, so it starts from the beginning"
        if action.params.get("env", {}).get("WANDB_RUN_ID"):
            line += f"; W&B run {action.params['env']['WANDB_RUN_ID']} continues"
        return line
    return action.reason


def incident_notices(
    incident: Incident, actions: list[Action], *, oncall: str, now: float
) -> list[Notice]:
    """The owners' and the on-call's one message about an incident."""
    ordered = sorted(actions, key=lambda a: a.id or 0)
    lines = [_did(a) for a in ordered if a.kind is not ActionKind.NOTIFY]
    user_fault = incident.category in USER_FAULTS
    head = incident.explanation or incident.title
    if user_fault:
        lines.insert(
            0,
            f"this is a fault in the job itself ({incident.category}), not in the "
            "node: no node was touched",
        )
    body = head + "\n\nWhat was done:\n" + "\n".join(f"- {x}" for x in lines or ["nothing"])
    if user_fault and incident.action:
        body += f"\n\nTo do: {incident.action}"
    subject = f"[fleetmedic] incident {incident.id}: {incident.title}"[:255]
    out = []
    owners: dict[str, str] = {}
    for job in incident.affected_jobs:
        if job.user:
            owners.setdefault(job.user, job.job_id)
    for user, job_id in sorted(owners.items()):
        out.append(
            Notice(
                key=f"incident:{incident.id}:owner:{user}",
                ts=now,
                kind="owner",
                recipient=user,
                incident_id=incident.id,
                job_id=job_id,
                subject=subject,
                body=body,
            )
        )
    if not user_fault:  # a user's own bug pages nobody
        extra = "" if owners else "\n\n(no job owner is known to tell)"
        out.append(
            Notice(
                key=f"incident:{incident.id}:oncall",
                ts=now,
                kind="oncall",
                recipient=oncall,
                incident_id=incident.id,
                subject=subject,
                body=body + extra,
            )
        )
    return out


def oncall_alert(
    *, key: str, subject: str, body: str, oncall: str, now: float, action: Action | None = None
) -> Notice:
    """An alert for the on-call (breaker tripped, node kept out for support, budget spent)."""
    return Notice(
        key=key,
        ts=now,
        kind="oncall",
        recipient=oncall,
        incident_id=action.incident_id if action else None,
        job_id=action.job_id if action else None,
        action_id=action.id if action else None,
        subject=f"[fleetmedic] {subject}"[:255],
        body=body,
    )
