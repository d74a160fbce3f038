"""What the Kubernetes source last saw, so it reports changes (JOB_STATE, NODE_STATE) once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.base import Observations
from collector.kubernetes import convert
from timeline.models import Event, EventKind, Job, Node, Severity

_BAD_TERMINATIONS = frozenset({"OOMKilled", "Error", "ContainerCannotRun", "DeadlineExceeded"})


@dataclass
class _PodSeen:
    job: Job
    signature: tuple[Any, ...]
    key: str  # namespace/name


@dataclass
class ClusterState:
    """Last seen pods, nodes and events; turns each new observation into what changed."""

    cluster: str = "default"
    gpu_resource: str = "nvidia.com/gpu"
    user_keys: Sequence[str] = ("fleetmedic.io/user", "user")
    gpu_pods_only: bool = True
    clock: Callable[[], float] = field(default=lambda: 0.0)
    max_seen_events: int = 50_000
    all_events: bool = False  # else: Warnings, Node events, and any event of a tracked pod
    pods: dict[str, _PodSeen] = field(default_factory=dict)  # by uid
    nodes: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # name -> signature
    _seen_events: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def pod_nodes(self) -> dict[str, str]:
        """namespace/name -> node of every tracked pod, to place pod events on a node."""
        with self._lock:
            return {p.key: p.job.nodes[0] for p in self.pods.values() if p.job.nodes}

    # --- pods ---

    def pod(self, obj: Mapping[str, Any], *, deleted: bool = False) -> Observations:
        """One pod seen (ADDED/MODIFIED, or DELETED when deleted=True)."""
        job = convert.pod_to_job(
            obj, cluster=self.cluster, gpu_resource=self.gpu_resource, user_keys=self.user_keys
        )
        if self.gpu_pods_only and not job.gpus:
            return Observations()
        uid = str(job.payload.get("uid") or job.job_id)
        now, last = convert.pod_terminations(obj)
        sig = (job.state, job.reason, job.restart_count, _term_sig(now), _term_sig(last), deleted)
        with self._lock:
            before = self.pods.get(uid)
            if deleted:
                self.pods.pop(uid, None)
            else:
                self.pods[uid] = _PodSeen(job=job, signature=sig, key=job.job_id)
        return self._pod_obs(job, uid, before, sig, now, last, deleted)

    def _pod_obs(
        self,
        job: Job,
        uid: str,
        before: _PodSeen | None,
        sig: tuple[Any, ...],
        now: convert.Termination | None,
        last: convert.Termination | None,
        deleted: bool,
    ) -> Observations:
        ts = self.clock()
        if deleted:
            job.payload["deleted"] = True
            if job.end_ts is None:
                job.end_ts = ts
        obs = Observations(jobs=[job])
        if alloc := convert.pod_allocation(job, deleted_ts=ts if deleted else None):
            obs.allocations.append(alloc)
        if before is None or before.signature != sig:
            obs.events.append(_job_state_event(job, uid, before, now, last, deleted, ts))
        return obs

    def pods_relisted(self, items: Iterable[Any], bad: Callable[[str, Any], None]) -> Observations:
        """A full pod list: report each pod, and pods gone since (their DELETED was missed)."""
        obs = Observations()
        present: set[str] = set()
        for item in items:
            try:
                meta = convert.metadata(item)
                present.add(str(meta.get("uid") or ""))
                obs.extend(self.pod(item))
            except (convert.MalformedObject, KeyError, TypeError, ValueError) as exc:
                bad("pod", exc)
        with self._lock:
            gone = [p for uid, p in self.pods.items() if uid not in present]
        for p in gone:
            obs.extend(self._gone(p))
        return obs

    def _gone(self, seen: _PodSeen) -> Observations:
        uid = str(seen.job.payload.get("uid") or seen.job.job_id)
        with self._lock:
            self.pods.pop(uid, None)
        job = seen.job.model_copy(deep=True)
        return self._pod_obs(job, uid, seen, (*seen.signature[:-1], True), None, None, True)

    # --- events ---

    def event(self, obj: Mapping[str, Any]) -> Observations:
        """One core/v1 Event; a repeat of the same uid+count is reported once."""
        ev = convert.event_to_event(obj, pod_nodes=self.pod_nodes())
        if not (self.all_events or self._wanted(ev)):
            return Observations()
        key = ev.dedup_key or ""
        with self._lock:
            if key in self._seen_events:
                return Observations()
            self._seen_events[key] = None
            while len(self._seen_events) > self.max_seen_events:
                self._seen_events.popitem(last=False)
        return Observations(events=[ev])

    def _wanted(self, ev: Event) -> bool:
        # Normal events of pods that are not jobs here (Pulled, Started of every system pod)
        # would swamp the timeline; Warnings are kept for all, a pod may not be seen yet.
        if ev.severity != Severity.INFO or ev.payload["involved_object"]["kind"] == "Node":
            return True
        with self._lock:
            return any(p.key == ev.job_id for p in self.pods.values())

    # --- nodes ---

    def node(self, obj: Mapping[str, Any], *, deleted: bool = False) -> Observations:
        """One node; a change of readiness, cordon or taints gives a NODE_STATE event."""
        node = convert.node_to_node(
            obj, cluster=self.cluster, gpu_resource=self.gpu_resource, now=self.clock()
        )
        pressure = convert.node_pressure(obj)
        if deleted:
            node.state = "Deleted"
        taint_keys = tuple(sorted(f"{t.get('key')}:{t.get('effect')}" for t in node.taints))
        sig = (node.state, node.unschedulable, taint_keys, tuple(pressure))
        with self._lock:
            before = self.nodes.get(node.name)
            if deleted:
                self.nodes.pop(node.name, None)
            else:
                self.nodes[node.name] = sig
        obs = Observations(nodes=[node])
        if before != sig:
            obs.events.append(_node_state_event(node, before, sig, pressure, self.clock()))
        return obs


def _term_sig(t: convert.Termination | None) -> tuple[Any, ...] | None:
    return None if t is None else (t.container, t.reason, t.exit_code, t.finished_ts)


def _job_state_event(
    job: Job,
    uid: str,
    before: _PodSeen | None,
    now: convert.Termination | None,
    last: convert.Termination | None,
    deleted: bool,
    ts: float,
) -> Event:
    """JOB_STATE: the pod's phase and the termination the kubelet recorded, as facts."""
    term = now or last
    # A restart of a container after a termination is news even when the phase did not move.
    if before is not None and last is not None and _term_sig(last) == before.signature[4]:
        term = now
    was = before.job.state if before else None
    bad = job.state == "Failed" or (term is not None and term.reason in _BAD_TERMINATIONS)
    what = f"{was} -> {job.state}" if was and was != job.state else job.state
    if deleted:
        what += " (deleted)"
    detail = f" ({term.reason}, exit {term.exit_code}, container {term.container})" if term else ""
    event_ts = (term.finished_ts if term and term.finished_ts else None) or ts
    return Event(
        ts=event_ts,
        node=job.nodes[0] if job.nodes else None,
        source=convert.SOURCE,
        kind=EventKind.JOB_STATE,
        job_id=job.job_id,
        code=term.exit_code if term else None,
        severity=Severity.ERROR if bad else Severity.INFO,
        message=f"pod {job.job_id} {what}{detail}"[:4096],
        payload={
            "from": was,
            "to": job.state,
            "reason": job.reason,
            "deleted": deleted,
            "restart_count": job.restart_count,
            "termination": term.as_payload() if term else None,
            "gpus": job.gpus,
        },
        dedup_key=convert.short_key(
            "pod", uid, job.state, job.restart_count, deleted, _term_sig(term)
        ),
    )


def _node_state_event(
    node: Node,
    before: tuple[Any, ...] | None,
    sig: tuple[Any, ...],
    pressure: list[str],
    ts: float,
) -> Event:
    was = before[0] if before else None
    what = f"{was} -> {node.state}" if was and was != node.state else str(node.state)
    if node.unschedulable:
        what += ", unschedulable"
    bad = node.state != "Ready" or bool(pressure)
    return Event(
        ts=node.reason_ts if (was != node.state and node.reason_ts) else ts,
        node=node.name,
        source=convert.SOURCE,
        kind=EventKind.NODE_STATE,
        severity=Severity.WARNING if bad else Severity.INFO,
        message=f"node {node.name} {what}" + (f" ({node.reason})" if node.reason else ""),
        payload={
            "from": was,
            "to": node.state,
            "reason": node.reason,
            "unschedulable": node.unschedulable,
            "taints": node.taints,
            "pressure": pressure,
            "gpu_count": node.gpu_count,
            "gpu_allocatable": node.gpu_allocatable,
        },
        dedup_key=convert.short_key("node", node.name, *sig, node.reason_ts),
    )
