"""From an incident to the actions its policy rule asks for, each with an idempotency key.

Planning is repeatable: the same incident read again (a restart, an update) yields the same
keys, and the store keeps one row per key. Drains carry the breaker's epoch in their key, and
evidence from before a breaker reset plans no drain, so a reset never replays old work. They
also carry the node's generation (how often we let go of it), so a node that came back and
fails again is drained again, on evidence newer than its return only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from correlator import tables as ct
from correlator.models import Incident
from correlator.rules.xid import xid_info
from healer import tables as ht
from healer.models import REASON_PREFIX, Action, ActionKind, ActionState, BreakerState
from healer.policy import Policy, Rule
from healer.safety import drain_reason
from timeline import tables as t

# Jobs that ended on their own terms are not run again.
_SETTLED = frozenset({"COMPLETED", "CANCELLED", "Succeeded"})


@dataclass
class NodeInfo:
    """What the store knows of a node: its scheduler, cluster and first partition."""

    scheduler: str | None
    cluster: str
    partition: str | None


def node_info(session: Session, *, node: str) -> NodeInfo:
    """The node's scheduler, cluster and partition as the scheduler source stored them."""
    n = t.nodes
    row = session.execute(
        select(n.c.scheduler, n.c.cluster, n.c.labels).where(n.c.name == node)
    ).first()
    if row is None:
        return NodeInfo(None, "default", None)
    parts = str((row[2] or {}).get("partitions") or "").split(",")
    return NodeInfo(row[0], row[1] or "default", parts[0] or None)


def _job_rows(session: Session, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    if not job_ids:
        return {}
    j = t.jobs
    stmt = select(
        j.c.job_id, j.c.scheduler, j.c.cluster, j.c.partition, j.c.account, j.c.state, j.c.user
    ).where(j.c.job_id.in_(job_ids))
    return {r.job_id: dict(r._mapping) for r in session.execute(stmt)}


def _occurrences(session: Session, *, incident: Incident, rule: Rule, now: float) -> int:
    """Incidents of this rule's categories on the incident's node within the rule's window."""
    i = ct.incidents
    stmt = select(func.count()).where(
        i.c.culprit_node == incident.culprit_node,
        i.c.category.in_(rule.category or [incident.category]),
        i.c.opened_ts >= now - rule.window_s,
        i.c.opened_ts <= now,
    )
    return int(session.execute(stmt).scalar_one())


def node_generation(session: Session, *, cluster: str, node: str) -> tuple[int, float]:
    """How many times we let go of this node (returned, released to a person, or found it a
    person's), and when we last did: new evidence after that is new work."""
    a = ht.actions
    stmt = select(a.c.result, a.c.finished_ts).where(
        a.c.kind == ActionKind.DRAIN.value,
        a.c.cluster == cluster,
        a.c.node == node,
        a.c.state == ActionState.DONE.value,
    )
    gen, last = 0, 0.0
    for result, finished in session.execute(stmt).all():
        result = result or {}
        if not result.get("holding"):
            gen += 1
            last = max(last, float(result.get("released_ts") or finished or 0.0))
    return gen, last


def reset_suffices(incident: Incident) -> bool:
    """True when NVIDIA's Xid catalog says a GPU reset is the fix for this incident's Xid."""
    if incident.kind != "xid" or incident.code is None:
        return False
    info = xid_info(incident.code)
    return info is not None and info.immediate_action == "RESET_GPU"


def _cause(incident: Incident) -> str:
    """A short cause for a drain reason. Not the incident's title: the scheduler source reads
    the reason back, and words like "fallen off the bus" would make a new incident of it."""
    code = f" Xid {incident.code}" if incident.kind == "xid" and incident.code is not None else ""
    return f"{incident.category or 'fault'}{code}"


def _our_echo(incident: Incident) -> bool:
    """An incident made of our own drain showing up in the scheduler's node state."""
    evidence = " ".join(str(x) for x in incident.details.get("evidence") or [])
    return incident.kind == "node_state" and REASON_PREFIX in evidence


class Planner:
    """Turns incidents into planned actions under one policy and breaker state."""

    def __init__(
        self,
        session: Session,
        *,
        policy: Policy,
        breaker: BreakerState,
        now: float,
        replay: bool = False,
    ) -> None:
        self.session = session
        self.policy = policy
        self.breaker = breaker
        self.now = now
        # A backtest replays history: a job that has ended since was running when it was hit.
        self.replay = replay

    def plan(self, incident: Incident) -> list[Action]:
        """The actions this incident calls for (none when resolved or no rule matches)."""
        if incident.state.value != "open" or incident.id is None:
            return []
        rule = self.policy.rule_for(incident)
        if rule is None or _our_echo(incident):
            return []
        out: list[Action] = []
        for kind in rule.actions:
            if kind is ActionKind.DRAIN:
                out += self._drain(incident, rule)
            elif kind is ActionKind.RECOVER:
                out += self._recover(incident, rule)
            elif kind is ActionKind.NOTIFY:
                out.append(self._notify(incident, rule))
        return out

    def _mode(
        self, kind: ActionKind, cluster: str, partition: str | None, inc: Incident, rule: Rule
    ) -> Any:
        return self.policy.mode_for(
            kind=kind, cluster=cluster, partition=partition, confidence=inc.confidence, rule=rule
        )

    def _drain(self, inc: Incident, rule: Rule) -> list[Action]:
        node = inc.culprit_node
        if node is None:
            return []
        if self.breaker.reset_ts is not None and inc.last_seen_ts <= self.breaker.reset_ts:
            return []  # evidence from before the breaker reset: never replayed as new work
        if rule.occurrences > 1:
            seen = _occurrences(self.session, incident=inc, rule=rule, now=self.now)
            if seen < rule.occurrences:
                return []
        info = node_info(self.session, node=node)
        gen, let_go = node_generation(self.session, cluster=info.cluster, node=node)
        if gen and inc.last_seen_ts <= let_go:
            return []  # evidence from before the node came back: that drain is over
        scheduler = info.scheduler or next((j.scheduler for j in inc.affected_jobs), None)
        kind = ActionKind.DRAIN
        params: dict[str, Any] = {"category": inc.category, "rule": rule.name}
        if rule.gpu_reset and self.policy.gpu_reset_command and reset_suffices(inc):
            kind = ActionKind.RESET_GPU
            params |= {"gpu": inc.culprit_gpu_index, "pci": inc.culprit_pci_bus_id}
        key = f"{kind.value}:{info.cluster}:{node}:i{inc.id}:e{self.breaker.epoch}:g{gen}"
        confirm_at = None
        if rule.confirm_s > 0 and inc.kind in ("node_state", "pod_event"):
            params["confirm"] = True  # drain only if the scheduler still sees it unhealthy
            confirm_at = inc.opened_ts + rule.confirm_s
        return [
            Action(
                not_before_ts=confirm_at,
                key=key,
                kind=kind,
                mode=self._mode(kind, info.cluster, info.partition, inc, rule),
                scheduler=scheduler,
                cluster=info.cluster,
                partition=info.partition,
                node=node,
                incident_id=inc.id,
                reason=drain_reason(incident_id=inc.id, cause=_cause(inc)),
                params=params,
            )
        ]

    def _recover(self, inc: Incident, rule: Rule) -> list[Action]:
        rows = _job_rows(self.session, [j.job_id for j in inc.affected_jobs])
        out = []
        for job in inc.affected_jobs:
            row = rows.get(job.job_id) or {}
            if row.get("state") in _SETTLED and not self.replay:
                continue
            scheduler = row.get("scheduler") or job.scheduler
            cluster = row.get("cluster") or "default"
            part = row.get("partition") or (
                row.get("account") if scheduler == "kubernetes" else None
            )
            # Not keyed on scheduler or cluster: a job first seen by an agent alone is the
            # same job once its scheduler's source reports it.
            key = f"recover:{job.job_id}:i{inc.id}"
            out.append(
                Action(
                    key=key,
                    kind=ActionKind.RECOVER,
                    mode=self._mode(ActionKind.RECOVER, cluster, part, inc, rule),
                    scheduler=scheduler,
                    cluster=cluster,
                    partition=part,
                    node=inc.culprit_node,
                    job_id=job.job_id,
                    incident_id=inc.id,
                    reason=f"run job {job.job_id} again after {_cause(inc)} [incident {inc.id}]",
                    params={"rule": rule.name, "max_recoveries": rule.max_recoveries},
                )
            )
        return out

    def _notify(self, inc: Incident, rule: Rule) -> Action:
        cluster = "default"
        if inc.culprit_node:
            cluster = node_info(self.session, node=inc.culprit_node).cluster
        return Action(
            key=f"notify:i{inc.id}",
            kind=ActionKind.NOTIFY,
            mode=self._mode(ActionKind.NOTIFY, cluster, None, inc, rule),
            cluster=cluster,
            node=inc.culprit_node,
            job_id=inc.job_id,
            incident_id=inc.id,
            reason=f"tell the owners and the on-call about incident {inc.id}",
            params={"rule": rule.name},
        )
