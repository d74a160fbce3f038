"""Slurm nodes: Node rows from `scontrol show node`, NODE_STATE events when health changes."""

from __future__ import annotations

from collector.base import Observations
from collector.health import SourceHealth
from collector.slurm.parse import parse_counted
from collector.slurm.scontrol import ScontrolNode, parse_scontrol_nodes
from timeline.models import Event, EventKind, Node, Scheduler, Severity

# Base states and flags that take a node out of service or say it is unwell. IDLE <-> MIXED <->
# ALLOCATED churn with every job and is not worth an event.
_BAD_BASE = frozenset({"DOWN", "DRAINED", "DRAINING", "FAIL", "FAILING", "INVAL", "UNKNOWN"})
_BAD_FLAGS = frozenset(
    {"DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "NOT_RESPONDING", "INVALID_REG", "MAINT"}
)


def _condition(node: ScontrolNode) -> tuple[str, ...]:
    """The part of a node's state that matters for health: bad base state and bad flags."""
    bad = [node.base_state] if node.base_state in _BAD_BASE else []
    bad += sorted(f for f in node.flags if f in _BAD_FLAGS)
    return tuple(bad)


class NodeTracker:
    """Turns `scontrol show node` into Node rows and change events; remembers the last state."""

    def __init__(self, *, cluster: str, health: SourceHealth, source: str = "slurm") -> None:
        self.cluster = cluster
        self.health = health
        self.source = source
        self._last: dict[str, tuple[tuple[str, ...], str | None]] = {}

    def collect(self, text: str | None, now: float, obs: Observations) -> None:
        """Add nodes and NODE_STATE events for one `scontrol show node` output (None: failed)."""
        if text is None:
            return
        nodes = parse_counted(
            text, parse_scontrol_nodes, self.health, whole="scontrol_show_node",
            record="scontrol_node_record",
        )  # fmt: skip
        for n in nodes or []:
            obs.nodes.append(self._node(n, now))
            event = self._event(n, now)
            if event is not None:
                obs.events.append(event)

    def _node(self, n: ScontrolNode, now: float) -> Node:
        labels = {"partitions": ",".join(n.partitions)}
        if n.gpus_alloc is not None:
            labels["gpus_alloc"] = str(n.gpus_alloc)
        return Node(
            name=n.name,
            scheduler=Scheduler.SLURM,
            cluster=self.cluster,
            state=n.state,
            reason=n.reason,
            reason_user=n.reason_user,
            reason_ts=n.reason_ts,
            unschedulable=bool(_condition(n)),
            gpu_count=n.gpus,
            gpu_allocatable=n.gpus,
            labels=labels,
            updated_ts=now,
        )

    def _event(self, n: ScontrolNode, now: float) -> Event | None:
        cond = _condition(n)
        prev = self._last.get(n.name)
        self._last[n.name] = (cond, n.reason)
        if prev is None and not cond:
            return None  # first sight of a healthy node: nothing happened
        if prev is not None and prev == (cond, n.reason):
            return None
        # A first sight of a bad node keys on the reason's time so a restart repeats nothing.
        stamp = n.reason_ts if prev is None or n.reason_ts else now
        key = f"{self.cluster}:{n.name}:{'+'.join(cond) or 'OK'}:{int(stamp or 0)}"
        was = "+".join(prev[0]) if prev else None
        text = f"slurm node {n.name} {n.state}"
        if n.reason:
            text += f": {n.reason}"
            if n.reason_user:
                text += f" (set by {n.reason_user})"
        return Event(
            ts=n.reason_ts if cond and n.reason_ts else now,
            node=n.name,
            source=self.source,
            kind=EventKind.NODE_STATE,
            severity=Severity.WARNING if cond else Severity.INFO,
            message=text,
            payload={
                "cluster": self.cluster,
                "state": n.state,
                "condition": list(cond),
                "previous_condition": was,
                "reason": n.reason,
                "reason_user": n.reason_user,
                "reason_ts": n.reason_ts,
            },
            dedup_key=key,
        )
