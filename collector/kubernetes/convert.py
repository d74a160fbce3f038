"""Kubernetes object JSON (as the API server sends it) to timeline types; facts only, no meaning."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from timeline.bounds import MESSAGE_MAX, clean_name, clean_text
from timeline.models import Allocation, Event, EventKind, Job, Node, Scheduler, Severity

SOURCE = "kubernetes"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class MalformedObject(ValueError):
    """A Kubernetes object lacks a field every real object has, or has it in the wrong type."""


def parse_ts(value: Any) -> float | None:
    """RFC 3339 time as Kubernetes writes it (`2024-11-17T10:19:41Z`, maybe micros) to epoch."""
    if not value or not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _dict(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key) or {}
    if not isinstance(value, Mapping):
        raise MalformedObject(f"{key} is {type(value).__name__}, not an object")
    return value


def _list(obj: Mapping[str, Any], key: str) -> Sequence[Any]:
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise MalformedObject(f"{key} is {type(value).__name__}, not a list")
    return value


def metadata(obj: Any) -> Mapping[str, Any]:
    """The object's metadata; raises MalformedObject when the object has no name."""
    if not isinstance(obj, Mapping):
        raise MalformedObject(f"object is {type(obj).__name__}, not an object")
    meta = _dict(obj, "metadata")
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise MalformedObject("metadata.name missing")
    return meta


def quantity_int(value: Any) -> int:
    """An extended-resource quantity (`"8"`, `8`) as an int; GPUs are never fractional."""
    if value is None:
        return 0
    try:
        return int(str(value))
    except ValueError as exc:
        raise MalformedObject(f"bad quantity {value!r}") from exc


def pod_gpus(pod: Mapping[str, Any], resource: str) -> int:
    """GPUs the pod holds: sum over containers, at least the largest init container's (K8s rule)."""
    spec = _dict(pod, "spec")

    def need(c: Any) -> int:
        res = _dict(c, "resources") if isinstance(c, Mapping) else {}
        return max(
            quantity_int(_dict(res, "limits").get(resource)),
            quantity_int(_dict(res, "requests").get(resource)),
        )

    main = sum(need(c) for c in _list(spec, "containers"))
    init = max((need(c) for c in _list(spec, "initContainers")), default=0)
    return max(main, init)


@dataclass(frozen=True)
class Termination:
    """One container's termination as the kubelet recorded it."""

    container: str
    reason: str | None
    exit_code: int | None
    signal: int | None
    finished_ts: float | None
    current: bool  # False when it comes from lastState (the container was restarted)

    def as_payload(self) -> dict[str, Any]:
        """JSON-able form for event payloads."""
        return {
            "container": self.container,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "finished_ts": self.finished_ts,
            "current": self.current,
        }


def _termination(name: str, state: Mapping[str, Any], current: bool) -> Termination | None:
    term = _dict(state, "terminated")
    if not term:
        return None
    code = term.get("exitCode")
    code = code if isinstance(code, int) else None
    sig = term.get("signal") if isinstance(term.get("signal"), int) else None
    return Termination(
        container=name,
        reason=term.get("reason"),
        exit_code=code,
        signal=sig,
        finished_ts=parse_ts(term.get("finishedAt")),
        current=current,
    )


def container_summaries(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per container: state word, waiting/terminated reason, exit codes, restarts."""
    status = _dict(pod, "status")
    out = []
    for cs in [*_list(status, "initContainerStatuses"), *_list(status, "containerStatuses")]:
        if not isinstance(cs, Mapping):
            raise MalformedObject("containerStatuses item is not an object")
        name = str(cs.get("name", "?"))
        state = _dict(cs, "state")
        kind = next(iter(state), "unknown")
        now = _termination(name, state, True)
        last = _termination(name, _dict(cs, "lastState"), False)
        waiting = _dict(state, "waiting")
        out.append(
            {
                "name": name,
                "state": kind,
                "waiting_reason": waiting.get("reason"),
                "terminated": now.as_payload() if now else None,
                "last_terminated": last.as_payload() if last else None,
                "restart_count": int(cs.get("restartCount") or 0),
            }
        )
    return out


def pod_terminations(pod: Mapping[str, Any]) -> tuple[Termination | None, Termination | None]:
    """(current termination to report, newest earlier one from a restart), non-zero codes first."""
    status = _dict(pod, "status")
    current: list[Termination] = []
    earlier: list[Termination] = []
    for cs in [*_list(status, "initContainerStatuses"), *_list(status, "containerStatuses")]:
        if not isinstance(cs, Mapping):
            raise MalformedObject("containerStatuses item is not an object")
        name = str(cs.get("name", "?"))
        if t := _termination(name, _dict(cs, "state"), True):
            current.append(t)
        if t := _termination(name, _dict(cs, "lastState"), False):
            earlier.append(t)
    current.sort(key=lambda t: (t.exit_code in (0, None), -(t.finished_ts or 0)))
    earlier.sort(key=lambda t: -(t.finished_ts or 0))
    return (current[0] if current else None), (earlier[0] if earlier else None)


def _user(meta: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    labels = _dict(meta, "labels")
    annotations = _dict(meta, "annotations")
    for key in keys:
        value = annotations.get(key) or labels.get(key)
        if isinstance(value, str) and value:
            return clean_name(value, 128)  # an annotation: any text its author liked
    return None


def pod_to_job(
    pod: Mapping[str, Any], *, cluster: str, gpu_resource: str, user_keys: Sequence[str]
) -> Job:
    """A pod as a timeline Job: job_id namespace/name, state = phase, exit from the kubelet."""
    meta = metadata(pod)
    spec = _dict(pod, "spec")
    status = _dict(pod, "status")
    ns = str(meta.get("namespace") or "default")
    phase = str(status.get("phase") or "Unknown")
    current, _ = pod_terminations(pod)
    containers = container_summaries(pod)
    waiting = next((c["waiting_reason"] for c in containers if c["waiting_reason"]), None)
    terminal = phase in TERMINAL_PHASES
    end_ts = current.finished_ts if (terminal and current) else None
    owners = _list(meta, "ownerReferences")
    owner = owners[0] if owners and isinstance(owners[0], Mapping) else {}
    return Job(
        scheduler=Scheduler.KUBERNETES,
        job_id=f"{ns}/{meta['name']}"[:128],
        cluster=cluster,
        name=str(meta["name"])[:255],
        user=_user(meta, user_keys),
        account=ns[:128],
        state=phase[:32],
        reason=(status.get("reason") or (current.reason if current else None) or waiting),
        submit_ts=parse_ts(meta.get("creationTimestamp")),
        start_ts=parse_ts(status.get("startTime")),
        end_ts=end_ts,
        exit_code=current.exit_code if current else None,
        signal=current.signal if current else None,
        nodes=[spec["nodeName"]] if isinstance(spec.get("nodeName"), str) else [],
        gpus=pod_gpus(pod, gpu_resource),
        restart_count=sum(c["restart_count"] for c in containers),
        payload={
            "uid": meta.get("uid"),
            "message": status.get("message"),
            "qos_class": status.get("qosClass"),
            "restart_policy": spec.get("restartPolicy"),
            "owner": f"{owner.get('kind')}/{owner.get('name')}" if owner else None,
            "containers": containers,
        },
    )


def pod_allocation(job: Job, *, deleted_ts: float | None = None) -> Allocation | None:
    """The node the pod holds GPUs on (GPU count in job.gpus, so gpu_index stays None)."""
    if not job.nodes or not job.gpus:
        return None
    start = job.start_ts or job.submit_ts
    if start is None:
        return None
    end = job.end_ts if job.end_ts is not None else deleted_ts
    return Allocation(
        scheduler=Scheduler.KUBERNETES,
        job_id=job.job_id,
        node=job.nodes[0],
        gpu_index=None,
        start_ts=start,
        end_ts=end,
    )


def short_key(*parts: Any) -> str:
    """A stable dedup key from parts; hashed when it would pass the store's 255-char limit."""
    key = ":".join(str(p) for p in parts)
    if len(key) <= 200:
        return key
    return key[:120] + ":" + hashlib.sha256(key.encode()).hexdigest()[:32]


def raw_json(obj: Any, limit: int = 16000) -> str:
    """The object as compact JSON, cut to the store's evidence limit."""
    text = json.dumps(obj, separators=(",", ":"), sort_keys=True, default=str)
    return text[:limit]


def event_to_event(ev: Mapping[str, Any], *, pod_nodes: Mapping[str, str]) -> Event:
    """A core/v1 Event as a POD_EVENT; dedup by uid+count so a repeat with a new count is new."""
    meta = metadata(ev)
    inv = _dict(ev, "involvedObject")
    src = _dict(ev, "source")
    series = _dict(ev, "series")
    count = ev.get("count") or series.get("count") or 1
    count = count if isinstance(count, int) and count >= 1 else 1
    last = (
        parse_ts(ev.get("lastTimestamp"))
        or parse_ts(series.get("lastObservedTime"))
        or parse_ts(ev.get("eventTime"))
        or parse_ts(ev.get("firstTimestamp"))
        or parse_ts(meta.get("creationTimestamp"))
    )
    if last is None:
        raise MalformedObject("event has no timestamp")
    kind = inv.get("kind")
    ref = f"{inv.get('namespace') or ''}/{inv.get('name') or ''}"
    node = inv.get("name") if kind == "Node" else (pod_nodes.get(ref) or src.get("host"))
    reason = str(ev.get("reason") or "")
    return Event(
        ts=last,
        node=node if isinstance(node, str) and node else None,
        source=SOURCE,
        kind=EventKind.POD_EVENT,
        job_id=ref[:128] if kind == "Pod" else None,
        severity=Severity.WARNING if ev.get("type") == "Warning" else Severity.INFO,
        message=clean_text(f"{reason}: {ev.get('message') or ''}", MESSAGE_MAX),
        raw=raw_json(ev),
        payload={
            "reason": reason,
            "type": ev.get("type"),
            "involved_object": {k: inv.get(k) for k in ("kind", "namespace", "name", "uid")},
            "count": count,
            "first_ts": parse_ts(ev.get("firstTimestamp")) or parse_ts(ev.get("eventTime")),
            "last_ts": last,
            "component": src.get("component") or ev.get("reportingComponent"),
        },
        count=count,
        dedup_key=short_key("event", meta.get("uid") or meta["name"], count),
    )


def _ready(conditions: Sequence[Any]) -> Mapping[str, Any]:
    for c in conditions:
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return c
    return {}


def node_to_node(node: Mapping[str, Any], *, cluster: str, gpu_resource: str, now: float) -> Node:
    """A Node: state from its Ready condition (Ready / NotReady / Unknown), taints, GPU counts."""
    meta = metadata(node)
    spec = _dict(node, "spec")
    status = _dict(node, "status")
    ready = _ready(_list(status, "conditions"))
    word = {"True": "Ready", "False": "NotReady"}.get(str(ready.get("status")), "Unknown")
    reason = None
    if word != "Ready":
        reason = f"{ready.get('reason') or ''}: {ready.get('message') or ''}".strip(": ") or None
    capacity = _dict(status, "capacity")
    allocatable = _dict(status, "allocatable")
    taints = [dict(t) for t in _list(spec, "taints") if isinstance(t, Mapping)]
    labels = {str(k): str(v) for k, v in _dict(meta, "labels").items()}
    return Node(
        name=str(meta["name"])[:255],
        scheduler=Scheduler.KUBERNETES,
        cluster=cluster,
        state=word,
        reason=reason[:1024] if reason else None,
        reason_ts=parse_ts(ready.get("lastTransitionTime")),
        unschedulable=bool(spec.get("unschedulable", False)),
        gpu_count=quantity_int(capacity.get(gpu_resource)) if gpu_resource in capacity else None,
        gpu_allocatable=(
            quantity_int(allocatable.get(gpu_resource)) if gpu_resource in allocatable else None
        ),
        labels=labels,
        taints=taints,
        updated_ts=now,
    )


def node_pressure(node: Mapping[str, Any]) -> list[str]:
    """Condition types other than Ready that are True (MemoryPressure, DiskPressure, ...)."""
    status = _dict(node, "status")
    return sorted(
        str(c.get("type"))
        for c in _list(status, "conditions")
        if isinstance(c, Mapping) and c.get("type") != "Ready" and c.get("status") == "True"
    )
