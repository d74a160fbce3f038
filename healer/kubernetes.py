"""Actions on a Kubernetes cluster with the official client: cordon + taint + annotate, and
recreating a failed pod's batch/v1 Job (or Kubeflow PyTorchJob) away from the cordoned nodes.

Ownership lives on the node: our annotations say who cordoned it, why and for which incident.
A node cordoned without them is a person's; we never touch it. Only owner kinds the policy
names (`kubernetes_recreate`) are deleted and recreated; other pods are left alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from healer.audit import Audit
from healer.kubernetes_objects import TAINT_KEY, recreated, split_job_id
from healer.models import Action, NodeStatus, StepOutcome

Save = Callable[[dict[str, Any]], None]
CORDONED_BY = "fleetmedic.io/cordoned-by"
REASON = "fleetmedic.io/reason"
INCIDENT = "fleetmedic.io/incident"
OURS = (CORDONED_BY, REASON, INCIDENT)
MERGE = "application/merge-patch+json"
_KINDS = {  # owner kind -> (API path prefix, pod label naming the owner)
    "Job": ("/apis/batch/v1", "batch.kubernetes.io/job-name"),
    "PyTorchJob": ("/apis/kubeflow.org/v1", "training.kubeflow.org/job-name"),
}


class KubernetesActor:
    """Cordons, uncordons and recreates workloads on one Kubernetes cluster."""

    scheduler = "kubernetes"

    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        cluster: str = "default",
        recreate_kinds: tuple[str, ...] = ("Job",),
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cluster = cluster
        self.recreate_kinds = recreate_kinds
        self.timeout_s = timeout_s
        self.clock = clock
        self.core = k8s.CoreV1Api(api_client)
        self.batch = k8s.BatchV1Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)

    def _call(
        self, audit: Audit, method: str, path: str, shown: Any, fn: Callable[..., Any], **kw: Any
    ) -> tuple[int, Any]:
        """One API call, audited; (HTTP status, decoded JSON body or None). Never raises."""

        def run() -> tuple[int, str]:
            try:
                resp = fn(_preload_content=False, _request_timeout=self.timeout_s, **kw)
                return int(resp.status), resp.data.decode("utf-8", errors="replace")
            except ApiException as exc:
                return int(exc.status or 0), str(exc.body or exc.reason or "")
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                return 0, f"{type(exc).__name__}: {exc}"

        status, text = audit.api(method, path, shown, run)
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, None

    # --- nodes ---

    def _read_node(self, name: str, audit: Audit) -> tuple[int, dict[str, Any]]:
        status, obj = self._call(
            audit, "GET", f"/api/v1/nodes/{name}", None, self.core.read_node, name=name
        )
        return status, obj if isinstance(obj, dict) else {}

    def node(self, name: str, audit: Audit) -> NodeStatus:
        """The node now: cordoned or not, and whether the cordon carries our annotations."""
        status, obj = self._read_node(name, audit)
        if status != 200:
            return NodeStatus(name=name, exists=False, reason=f"HTTP {status}")
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        out = bool((obj.get("spec") or {}).get("unschedulable"))
        ours = notes.get(CORDONED_BY) == "fleetmedic"
        reason = notes.get(REASON) if ours else None
        conditions = (obj.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return NodeStatus(
            name=name,
            out=out,
            reason=reason,
            ours=out and ours,
            healthy=ready,
            state="SchedulingDisabled" if out else "Ready",
        )

    def drain(
        self,
        node: str,
        reason: str,
        audit: Audit,
        *,
        category: str = "unhealthy",
        incident: int = 0,
    ) -> StepOutcome:
        """Cordon, taint fleetmedic.io/unhealthy=<category>:NoSchedule and annotate; a person's
        cordon is left as it is."""
        status, obj = self._read_node(node, audit)
        if status != 200:
            return StepOutcome.failed(f"cannot read node {node}: HTTP {status}")
        spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
        ours = (meta.get("annotations") or {}).get(CORDONED_BY) == "fleetmedic"
        if spec.get("unschedulable") and ours:
            audit.note(f"{node} is already cordoned by us")
            return StepOutcome.done(holding=True, drained=True, already=True)
        if spec.get("unschedulable"):
            audit.note(f"{node} was already cordoned by a person; not ours to touch")
            return StepOutcome.done(holding=False, noop=True)
        taints = [t for t in spec.get("taints") or [] if t.get("key") != TAINT_KEY]
        taint = {"key": TAINT_KEY, "value": (category or "unhealthy")[:63], "effect": "NoSchedule"}
        taints.append(taint)
        body = {
            "metadata": {
                "annotations": {CORDONED_BY: "fleetmedic", REASON: reason, INCIDENT: str(incident)}
            },
            "spec": {"unschedulable": True, "taints": taints},
        }
        status = self._patch_node(node, body, audit)
        if status != 200:
            return StepOutcome.failed(f"cordon of {node} failed: HTTP {status}")
        return StepOutcome.done(holding=True, drained=True)

    def _patch_node(self, node: str, body: dict[str, Any], audit: Audit) -> int:
        """One JSON merge patch of a node (lists such as taints are replaced whole)."""
        status, _ = self._call(
            audit,
            "PATCH",
            f"/api/v1/nodes/{node}",
            body,
            self.core.patch_node,
            name=node,
            body=body,
            _content_type=MERGE,
        )
        return status

    def _unmark(self, node: str, audit: Audit, *, uncordon: bool) -> StepOutcome:
        status, obj = self._read_node(node, audit)
        if status != 200:
            return StepOutcome.failed(f"cannot read node {node}: HTTP {status}")
        spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
        notes = meta.get("annotations") or {}
        if notes.get(CORDONED_BY) != "fleetmedic":
            return StepOutcome.failed(f"{node} is not cordoned by us; not touched")
        taints = [t for t in spec.get("taints") or [] if t.get("key") != TAINT_KEY]
        body: dict[str, Any] = {
            "metadata": {"annotations": dict.fromkeys(OURS)},
            "spec": {"taints": taints or None},
        }
        if uncordon:
            body["spec"]["unschedulable"] = None
        status = self._patch_node(node, body, audit)
        if status != 200:
            return StepOutcome.failed(f"uncordon of {node} failed: HTTP {status}")
        return StepOutcome.done(resumed=uncordon, cleaned=True)

    def resume(self, node: str, audit: Audit) -> StepOutcome:
        """Uncordon a node we cordoned and remove our taint and annotations."""
        st = self.node(node, audit)
        if not st.out and not st.exists:
            return StepOutcome.failed(f"node {node} is gone")
        return self._unmark(node, audit, uncordon=True)

    def clean_up(self, node: str, audit: Audit) -> StepOutcome:
        """A person uncordoned our node: remove our taint and annotations, nothing left behind."""
        return self._unmark(node, audit, uncordon=False)

    # --- workloads ---

    def _pod(self, job_id: str, audit: Audit) -> dict[str, Any] | None:
        ns, name = split_job_id(job_id)
        status, obj = self._call(
            audit,
            "GET",
            f"/api/v1/namespaces/{ns}/pods/{name}",
            None,
            self.core.read_namespaced_pod,
            name=name,
            namespace=ns,
        )
        return obj if status == 200 and isinstance(obj, dict) else None

    def checkpoint_hints(self, job_id: str, audit: Audit) -> list[tuple[str, str]]:
        """Checkpoint directories a pod names: annotation, then FLEETMEDIC_CHECKPOINT_DIR env."""
        pod = self._pod(job_id, audit)
        if pod is None:
            return []
        out = []
        note = ((pod.get("metadata") or {}).get("annotations") or {}).get(
            "fleetmedic.io/checkpoint-dir"
        )
        if note:
            out.append(("annotation", str(note)))
        for c in (pod.get("spec") or {}).get("containers") or []:
            for env in c.get("env") or []:
                if env.get("name") == "FLEETMEDIC_CHECKPOINT_DIR" and env.get("value"):
                    out.append(("pod_env", str(env["value"])))
        return out

    def _owner_api(self, kind: str, ns: str) -> tuple[str, Any, Any, Any]:
        """(collection path, get, delete, create) for a Job or PyTorchJob in a namespace."""
        prefix, _ = _KINDS[kind]
        if kind == "Job":
            return (
                f"{prefix}/namespaces/{ns}/jobs",
                self.batch.read_namespaced_job,
                self.batch.delete_namespaced_job,
                self.batch.create_namespaced_job,
            )
        crd = ("kubeflow.org", "v1")

        def get(name: str, namespace: str, **kw: Any) -> Any:
            return self.custom.get_namespaced_custom_object(
                *crd, namespace, "pytorchjobs", name, **kw
            )

        def delete(name: str, namespace: str, **kw: Any) -> Any:
            return self.custom.delete_namespaced_custom_object(
                *crd, namespace, "pytorchjobs", name, **kw
            )

        def create(namespace: str, body: Any, **kw: Any) -> Any:
            return self.custom.create_namespaced_custom_object(
                *crd, namespace, "pytorchjobs", body, **kw
            )

        return f"{prefix}/namespaces/{ns}/pytorchjobs", get, delete, create

    def recover(
        self, action: Action, audit: Audit, save: Save, locate: Callable[[], None]
    ) -> StepOutcome:
        """Delete the failed workload's pods and the workload, recreate it elsewhere."""
        assert action.job_id is not None
        p = action.params
        ns, _ = split_job_id(action.job_id)
        if "owner" not in p:
            pod = self._pod(action.job_id, audit)
            if pod is None:
                return StepOutcome.failed(f"pod {action.job_id} is gone; its owner is unknown")
            refs = (pod.get("metadata") or {}).get("ownerReferences") or []
            owner = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
            if owner is None or owner.get("kind") not in self.recreate_kinds:
                kind = owner.get("kind") if owner else "no controller"
                return StepOutcome.done(
                    noop=True,
                    note=f"owner is {kind}: not named by the "
                    "policy's kubernetes_recreate; left alone",
                )
            p["owner"] = {"kind": owner["kind"], "name": owner["name"]}
            save(p)
        kind, name = p["owner"]["kind"], p["owner"]["name"]
        path, get, delete, create = self._owner_api(kind, ns)
        if "object" not in p:
            status, obj = self._call(
                audit, "GET", f"{path}/{name}", None, get, name=name, namespace=ns
            )
            if status != 200 or not isinstance(obj, dict):
                return StepOutcome.failed(f"cannot read {kind} {ns}/{name}: HTTP {status}")
            p["object"] = obj
            p["new_name"] = f"{name}-r{action.id}"[-63:].lstrip("-")
            save(p)
        if p.get("phase") not in ("gone", "create"):
            failed = self._delete_old(action, kind, name, audit, delete, path)
            if failed is not None:
                return failed
            p["phase"] = "gone"
            save(p)
        if p["phase"] == "gone":
            if self._pod(action.job_id, audit) is not None:  # terminating: grace period
                return StepOutcome.wait(self.clock() + 1.0, note="old pod still terminating")
            locate()  # the old pod has stopped: its newest complete checkpoint is final
            p["phase"] = "create"
            save(p)
        return self._create(action, kind, path, get, create, audit)

    def _delete_old(
        self, action: Action, kind: str, name: str, audit: Audit, delete: Any, path: str
    ) -> StepOutcome | None:
        ns, _ = split_job_id(str(action.job_id))
        _, label = _KINDS[kind]
        status, listed = self._call(
            audit,
            "GET",
            f"/api/v1/namespaces/{ns}/pods?labelSelector={label}={name}",
            None,
            self.core.list_namespaced_pod,
            namespace=ns,
            label_selector=f"{label}={name}",
        )
        pods = {str(action.job_id).split("/", 1)[1]}
        if status == 200 and isinstance(listed, dict):
            pods |= {i["metadata"]["name"] for i in listed.get("items") or [] if i.get("metadata")}
        for pod in sorted(pods):
            where = f"/api/v1/namespaces/{ns}/pods/{pod}"
            status, _ = self._call(
                audit,
                "DELETE",
                where,
                None,
                self.core.delete_namespaced_pod,
                name=pod,
                namespace=ns,
            )
            if status not in (200, 202, 404):
                return StepOutcome.failed(f"delete of pod {ns}/{pod} failed: HTTP {status}")
        body = {"propagationPolicy": "Background"}
        status, _ = self._call(
            audit,
            "DELETE",
            f"{path}/{name}",
            body,
            delete,
            name=name,
            namespace=ns,
            propagation_policy="Background",
        )
        if status not in (200, 202, 404):
            return StepOutcome.failed(f"delete of {kind} {ns}/{name} failed: HTTP {status}")
        return None

    def _create(
        self, action: Action, kind: str, path: str, get: Any, create: Any, audit: Audit
    ) -> StepOutcome:
        p = action.params
        ns, _ = split_job_id(str(action.job_id))
        new_name = p["new_name"]
        status, _ = self._call(
            audit, "GET", f"{path}/{new_name}", None, get, name=new_name, namespace=ns
        )
        if status != 200:
            body = recreated(
                p["object"],
                kind=kind,
                new_name=new_name,
                exclude=p.get("exclude") or [],
                env=p.get("env") or {},
                incident_id=action.incident_id,
            )
            status, _ = self._call(audit, "POST", path, body, create, namespace=ns, body=body)
            if status not in (200, 201, 409):
                return StepOutcome.failed(f"create of {kind} {ns}/{new_name} failed: HTTP {status}")
        else:
            audit.note(f"{kind} {ns}/{new_name} already exists")
        return StepOutcome.done(how="recreate", new_job_id=f"{ns}/{new_name}", kind=kind)
