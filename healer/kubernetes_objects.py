"""Building the recreated workload: the old object minus what the API server owns, plus node
anti-affinity to the cordoned nodes and the resume environment on every container."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

TAINT_KEY = "fleetmedic.io/unhealthy"
RECOVERY_OF = "fleetmedic.io/recovery-of"
JOB_TRACKING = "batch.kubernetes.io/job-tracking"  # set by the Job controller on its own Jobs
# Labels the Job controller stamps on a Job and its pod template; a new Job gets its own.
_CONTROLLER_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
    "training.kubeflow.org/job-name",
    "training.kubeflow.org/operator-name",
    "training.kubeflow.org/replica-type",
    "training.kubeflow.org/replica-index",
)
_SERVER_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "ownerReferences",
    "finalizers",
    "deletionTimestamp",
)


def split_job_id(job_id: str) -> tuple[str, str]:
    """'namespace/name' (how the timeline names a pod) -> (namespace, name)."""
    ns, _, name = job_id.partition("/")
    return (ns, name) if name else ("default", ns)


def _exclude_nodes(pod_spec: dict[str, Any], nodes: list[str]) -> None:
    """Add `metadata.name NotIn nodes` to every required node-selector term (terms are ORed)."""
    if not nodes:
        return
    affinity = pod_spec.setdefault("affinity", {})
    node_aff = affinity.setdefault("nodeAffinity", {})
    required = node_aff.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    rule = {"key": "metadata.name", "operator": "NotIn", "values": sorted(nodes)}
    for term in terms:
        fields = term.setdefault("matchFields", [])
        fields[:] = [
            f for f in fields if f.get("key") != "metadata.name" or f.get("operator") != "NotIn"
        ]
        fields.append(dict(rule))


def _set_env(pod_spec: dict[str, Any], env: Mapping[str, str]) -> None:
    for container in pod_spec.get("containers") or []:
        kept = [e for e in container.get("env") or [] if e.get("name") not in env]
        container["env"] = kept + [{"name": k, "value": str(v)} for k, v in env.items() if v]


def _template(tmpl: dict[str, Any], exclude: list[str], env: Mapping[str, str]) -> None:
    meta = tmpl.setdefault("metadata", {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in _CONTROLLER_LABELS}
    meta["labels"] = labels
    spec = tmpl.setdefault("spec", {})
    _exclude_nodes(spec, exclude)
    _set_env(spec, env)


def recreated(
    old: Mapping[str, Any],
    *,
    kind: str,
    new_name: str,
    exclude: Iterable[str],
    env: Mapping[str, str],
    incident_id: int | None,
) -> dict[str, Any]:
    """The new Job/PyTorchJob: same spec, a new name, away from `exclude`, with `env`."""
    obj = copy.deepcopy(dict(old))
    obj.pop("status", None)
    meta = obj.setdefault("metadata", {})
    old_name = meta.get("name")
    for key in _SERVER_META:
        meta.pop(key, None)
    meta["name"] = new_name
    meta["labels"] = {
        k: v for k, v in (meta.get("labels") or {}).items() if k not in _CONTROLLER_LABELS
    } | {RECOVERY_OF: str(old_name)[:63]}
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != JOB_TRACKING}
    notes[RECOVERY_OF] = str(old_name)
    if incident_id is not None:
        notes["fleetmedic.io/incident"] = str(incident_id)
    meta["annotations"] = notes
    spec = obj.setdefault("spec", {})
    nodes = sorted(set(exclude))
    if kind == "Job":
        spec.pop("selector", None)  # generated from the old Job's uid; the new one gets its own
        spec.pop("manualSelector", None)
        _template(spec.setdefault("template", {}), nodes, env)
    else:
        for replica in (spec.get("pytorchReplicaSpecs") or {}).values():
            _template(replica.setdefault("template", {}), nodes, env)
    return obj
