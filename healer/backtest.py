"""Replay stored incidents through a policy and say what would have happened: drains,
recoveries, breaker trips, nodes kept out, and GPU-hours saved against waiting for a person.

Nothing is written and no scheduler is called. Acting is assumed switched on everywhere (that is
the question a backtest answers); the policy's scopes still decide which actions would have
waited for an approval, and its threshold which would only have been proposed.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from correlator import tables as ct
from correlator.models import Incident, IncidentState
from healer.models import ActionKind, ActionMode, BreakerState
from healer.planner import Planner
from healer.policy import Policy, Scope
from timeline import tables as t


@dataclass
class _Sim:
    """The simulated healer's memory while incidents replay in time order."""

    drains: dict[str, deque[float]] = field(default_factory=lambda: defaultdict(deque))
    node_heals: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    job_recoveries: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    held: dict[str, float] = field(default_factory=dict)  # node -> time it went out
    support: dict[str, str] = field(default_factory=dict)
    tripped: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    by_rule: Counter[str] = field(default_factory=Counter)
    gpu_hours_saved: float = 0.0


def _acting(policy: Policy) -> Policy:
    """The policy with acting on everywhere, keeping which scopes want an approval."""
    approval = [s for s in policy.act if s.approval]
    return policy.model_copy(update={"act": [*approval, Scope()]})


def _gpus(session: Session, job_ids: list[str], default: int) -> dict[str, int]:
    if not job_ids:
        return {}
    stmt = select(t.jobs.c.job_id, t.jobs.c.gpus).where(t.jobs.c.job_id.in_(job_ids))
    return {r[0]: int(r[1] or default) for r in session.execute(stmt)}


def _sizes(session: Session) -> Counter[str]:
    return Counter(c or "default" for c in session.execute(select(t.nodes.c.cluster)).scalars())


class Backtest:
    """One replay of stored incidents through one policy."""

    def __init__(
        self, session: Session, *, policy: Policy, human_response_s: float, auto_s: float
    ) -> None:
        self.session = session
        self.policy = _acting(policy)
        self.human_response_s = human_response_s
        self.auto_s = auto_s
        self.sim = _Sim()
        self.sizes = _sizes(session)

    def _drain(self, node: str, cluster: str, ts: float) -> str:
        """'drained', 'blocked' (breaker) or 'already' (still held)."""
        sim, p = self.sim, self.policy
        if node in sim.held:
            return "already"
        window = sim.drains[cluster]
        while window and window[0] < ts - p.breaker_window_s:
            window.popleft()
        if sim.tripped or len(window) >= p.breaker_cap(self.sizes.get(cluster, 0)):
            if not sim.tripped:
                sim.tripped = True
                sim.counts["breaker_trips"] += 1
            return "blocked"
        window.append(ts)
        sim.held[node] = ts
        heals = [x for x in sim.node_heals[node] if x >= ts - p.node_heal_window_s] + [ts]
        sim.node_heals[node] = heals
        if len(heals) >= p.node_heal_limit:
            sim.support[node] = f"healed {len(heals)} times within the window"
        return "drained"

    def _recover(self, job_id: str, gpus: int, ts: float, limit: int | None) -> bool:
        sim, p = self.sim, self.policy
        done = [x for x in sim.job_recoveries[job_id] if x >= ts - p.requeue_window_s]
        budget = p.requeue_budget if limit is None else min(limit, p.requeue_budget)
        if len(done) >= budget:
            sim.counts["budget_exhausted"] += 1
            return False
        sim.job_recoveries[job_id] = [*done, ts]
        wait = max(0.0, self.human_response_s - self.auto_s)
        sim.gpu_hours_saved += gpus * wait / 3600.0
        return True

    def _return_nodes(self, ts: float) -> None:
        """Nodes whose fault went quiet come back when a validation is configured."""
        p = self.policy
        if not p.validation_command:
            return
        for node, since in list(self.sim.held.items()):
            if node not in self.sim.support and ts - since >= p.return_after_quiet_s:
                del self.sim.held[node]
                self.sim.counts["returns"] += 1

    def replay(self, incidents: list[Incident]) -> None:
        """Replay incidents in the order they opened."""
        sim = self.sim
        for inc in sorted(incidents, key=lambda i: i.opened_ts):
            self._return_nodes(inc.opened_ts)
            rule = self.policy.rule_for(inc)
            if rule is None or not rule.actions:
                sim.counts["no_action"] += 1
                continue
            sim.by_rule[rule.name] += 1
            planner = Planner(
                self.session,
                policy=self.policy,
                breaker=BreakerState(),
                now=inc.opened_ts,
                replay=True,
            )
            inc_open = inc.model_copy(update={"state": IncidentState.OPEN})
            actions = planner.plan(inc_open)
            gpus = _gpus(self.session, [a.job_id for a in actions if a.job_id], 8)
            for a in actions:
                if a.mode is ActionMode.PROPOSED:
                    sim.counts[f"proposed_{a.kind.value}"] += 1
                    continue
                if a.mode is ActionMode.APPROVAL:
                    sim.counts[f"awaiting_approval_{a.kind.value}"] += 1
                if a.kind in (ActionKind.DRAIN, ActionKind.RESET_GPU) and a.node:
                    outcome = self._drain(a.node, a.cluster, inc.opened_ts)
                    sim.counts[f"{a.kind.value}_{outcome}"] += 1
                elif a.kind is ActionKind.RECOVER and a.job_id:
                    ok = self._recover(
                        a.job_id,
                        gpus.get(a.job_id, 8),
                        inc.opened_ts,
                        a.params.get("max_recoveries"),
                    )
                    sim.counts["recoveries" if ok else "recoveries_refused"] += 1
                elif a.kind is ActionKind.NOTIFY:
                    sim.counts["notifications"] += 1

    def report(self, n: int) -> dict[str, Any]:
        """What would have happened, as one JSON-able object."""
        sim, c = self.sim, self.sim.counts
        return {
            "incidents": n,
            "incidents_acted_on": sum(sim.by_rule.values()),
            "drains": c["drain_drained"],
            "gpu_resets": c["reset_gpu_drained"],
            "drains_blocked_by_breaker": c["drain_blocked"] + c["reset_gpu_blocked"],
            "drains_already_out": c["drain_already"] + c["reset_gpu_already"],
            "breaker_trips": c["breaker_trips"],
            "recoveries": c["recoveries"],
            "recoveries_refused_by_budget": c["recoveries_refused"],
            "notifications": c["notifications"],
            "proposed_only": {k[9:]: v for k, v in c.items() if k.startswith("proposed_")},
            "awaiting_approval": {k[18:]: v for k, v in c.items() if k.startswith("awaiting_")},
            "returns": c["returns"],
            "nodes_kept_out": sorted(sim.held),
            "nodes_for_support": dict(sorted(sim.support.items())),
            "gpu_hours_saved": round(sim.gpu_hours_saved, 1),
            "by_rule": dict(sim.by_rule),
            "assumptions": {
                "acting": "on everywhere (scopes decide approvals only)",
                "human_response_s": self.human_response_s,
                "auto_recovery_s": self.auto_s,
                "gpus_per_job_when_unknown": 8,
            },
        }


def backtest(
    session: Session,
    *,
    policy: Policy,
    since: float,
    until: float | None = None,
    human_response_s: float = 2 * 3600.0,
    auto_s: float = 60.0,
) -> dict[str, Any]:
    """Replay incidents opened in [since, until) through `policy`; see the module doc."""
    i = ct.incidents
    stmt = select(i).where(i.c.opened_ts >= since)
    if until is not None:
        stmt = stmt.where(i.c.opened_ts < until)
    rows = [Incident.model_validate(dict(r)) for r in session.execute(stmt).mappings()]
    bt = Backtest(session, policy=policy, human_response_s=human_response_s, auto_s=auto_s)
    bt.replay(rows)
    return bt.report(len(rows))
