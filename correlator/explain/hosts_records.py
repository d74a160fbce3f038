"""Hosts that a structured record names for every line inside it: a Cloud Logging LogEntry or
a Kubernetes Event object, pretty-printed over many lines or one object a line."""

from __future__ import annotations

import json
import re

from correlator.explain.hosts import clean_host
from correlator.explain.hosts_yaml import block_mapping, yaml_record_spans

# Cloud Logging LogEntry records (gcloud logging read --format=json: an array of objects, pretty
# printed; a sink's export: one object a line). https://cloud.google.com/logging/docs/reference/
# v2/rest/v2/LogEntry: "labels" (compute.googleapis.com/resource_name, the instance's name, on
# a GCE instance's logs such as its serial console) and "resource" (a MonitoredResource: type
# k8s_node has labels.node_name; gce_instance's labels.instance_id is a number, never a host:
# https://cloud.google.com/logging/docs/api/v2/resource-list). A core/v1 Event carries
# "involvedObject" and names its reporting node in source.host.
# A Compute Engine audit entry (the system_event log: compute.instances.hostError, .preempted,
# .terminateOnHostMaintenance) has resource.type gce_instance, whose labels hold only the numeric
# instance_id; the instance it acted on is named in protoPayload.resourceName
# ("projects/P/zones/Z/instances/NAME", https://cloud.google.com/logging/docs/reference/audit/
# auditlog/rest/Shared.Types/AuditLog: resourceName; https://cloud.google.com/compute/docs/
# troubleshooting/troubleshooting-reboots).
# `journalctl -o json-pretty` prints each entry as one object over many lines, the node in its
# "_HOSTNAME" field (systemd.journal-fields(7); journalctl(1) --output json-pretty).
_GCE_INSTANCE = re.compile(r"^projects/[^/]+/zones/[^/]+/instances/([^/]+)$")
_LOGENTRY_KEYS = (
    '"insertId"',
    '"logName"',
    '"involvedObject"',
    '"_HOSTNAME"',
    "insertId:",
    "logName:",
)


def _record_spans(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line of each top-level JSON object, braces inside strings ignored."""
    spans: list[tuple[int, int]] = []
    depth, start, in_str, esc = 0, 0, False, False
    for i, line in enumerate(lines):
        for ch in line:
            if in_str:
                esc, in_str = (not esc and ch == "\\"), in_str and (esc or ch != '"')
            elif ch == '"':
                in_str = True
            elif ch == "{":
                start = i if depth == 0 else start
                depth += 1
            elif ch == "}" and depth:
                depth -= 1
                if depth == 0:
                    spans.append((start, i))
    return spans


def _entry_host(text: str) -> str | None:
    """The host a JSON record names (see _record_host)."""
    try:
        rec = json.loads(text.strip().rstrip(","))
    except ValueError:
        return None
    return _record_host(rec) if isinstance(rec, dict) else None


def _record_host(rec: dict[str, object]) -> str | None:
    """The host a record names: a journal entry's _HOSTNAME; a LogEntry's resource_name label,
    else a gce_instance audit entry's instance, else a k8s_node's node_name; a Kubernetes
    Event's source.host."""
    if isinstance(rec.get("_HOSTNAME"), str):  # a journal entry
        return clean_host(rec["_HOSTNAME"])  # type: ignore[arg-type]
    labels, res = rec.get("labels"), rec.get("resource")
    if isinstance(labels, dict) and isinstance(
        labels.get("compute.googleapis.com/resource_name"), str
    ):
        return clean_host(labels["compute.googleapis.com/resource_name"])
    gce = _gce_instance(rec)
    if gce:
        return gce
    if (
        isinstance(res, dict)
        and res.get("type") == "k8s_node"
        and isinstance(res.get("labels"), dict)
    ):
        node = res["labels"].get("node_name")
        return clean_host(node) if isinstance(node, str) else None
    # a core/v1 Event (kubectl get events -o json): its EventSource names the reporting node
    source = rec.get("source")
    if "involvedObject" in rec and isinstance(source, dict) and isinstance(source.get("host"), str):
        return clean_host(source["host"])
    return None


def _gce_instance(rec: dict[str, object]) -> str | None:
    """A gce_instance audit entry's instance, from its protoPayload.resourceName."""
    res, proto = rec.get("resource"), rec.get("protoPayload")
    if not (isinstance(res, dict) and res.get("type") == "gce_instance"):
        return None
    name = proto.get("resourceName") if isinstance(proto, dict) else None
    m = _GCE_INSTANCE.match(name) if isinstance(name, str) else None
    return clean_host(m.group(1)) if m else None


def logentry_hosts(lines: list[str]) -> list[str | None]:
    """For each line inside a Cloud Logging LogEntry record (or a Kubernetes Event object, or a
    journal entry), the host that record names."""
    hosts: list[str | None] = [None] * len(lines)
    if not any(k in line for line in lines for k in _LOGENTRY_KEYS):
        return hosts
    for first, last in _record_spans(lines):
        host = _entry_host("\n".join(lines[first : last + 1]))
        for i in range(first, last + 1):
            hosts[i] = host
    for first, last in yaml_record_spans(lines):
        host = _record_host(block_mapping(lines[first : last + 1]))
        for i in range(first, last + 1):
            hosts[i] = hosts[i] or host
    return hosts
