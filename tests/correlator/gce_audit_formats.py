"""Compute Engine system-event audit entries as `gcloud logging read` prints them (a LogEntry
with an AuditLog protoPayload: https://cloud.google.com/logging/docs/reference/audit/auditlog/rest/Shared.Types/AuditLog),
shared by the cloud-lifecycle probes (JSON) and the leftovers probes (YAML). Made-up values."""

from __future__ import annotations

from typing import Any

INSTANCES = ("gpu-a3-node-7", "gke-train-a3mega-pool-5f2c9d1e-x8kq", "a100-worker-12")
ZONES = ("us-central1-a", "europe-west4-b", "asia-southeast1-c")
HOST_ERROR = ("node", "node")
MAINTENANCE = ("node", "infra")
PREEMPTION = ("scheduler", "infra")

# methodName -> (status.message, verdict)
GCE_METHODS = {
    "compute.instances.hostError": ("Instance terminated by Compute Engine.", HOST_ERROR),
    "compute.instances.preempted": ("Instance was preempted.", PREEMPTION),
    "compute.instances.terminateOnHostMaintenance": (
        "Instance terminated during Compute Engine maintenance.",
        MAINTENANCE,
    ),
}


def audit_record(method: str, k: int, *, message: str = "") -> dict[str, Any]:
    """The LogEntry of a system event `method` on instance k (its status message the
    method's own, else `message`)."""
    return {
        "insertId": f"-x1y2z3e{k}abcd",
        "logName": "projects/train-proj/logs/cloudaudit.googleapis.com%2Fsystem_event",
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "authenticationInfo": {"principalEmail": "system@google.com"},
            "methodName": method,
            "request": {"@type": f"type.googleapis.com/{method}"},
            "resourceName": f"projects/train-proj/zones/{ZONES[k]}/instances/{INSTANCES[k]}",
            "serviceName": "compute.googleapis.com",
            "status": {"message": GCE_METHODS.get(method, (message,))[0]},
        },
        "receiveTimestamp": f"2026-03-0{k + 1}T10:00:01.5Z",
        "resource": {
            "labels": {"instance_id": f"81234567890123{k:05d}", "project_id": "train-proj"},
            "type": "gce_instance",
        },
        "severity": "INFO",
        "timestamp": f"2026-03-0{k + 1}T10:00:00.9Z",
    }
