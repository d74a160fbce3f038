"""The delivery a log line may come wrapped in, taken off line by line as the agent reads it.

A job's output reaches a file through a container runtime (CRI log files, docker's json-file),
or through a launcher that tags each line (Open MPI's --tag-output, Ray's worker prefix,
Determined's task log). Only shapes that no program line has of its own are taken here, one
line at a time: a prefix a log line may well start with ("12: ", "[3] ", a leading time stamp)
needs the whole text to tell, and `correlator.explain.wrappers` decides those for `explain`.
The formats and their sources are cited there; both read the shapes below.
"""

from __future__ import annotations

import json
import re

RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
CRI = re.compile(rf"^{RFC3339} (?:stdout|stderr) (?P<tag>[PF])(?::[\w:]{{0,32}})? ?")
KUBE_PREFIX = re.compile(r"^\[pod/(?P<h>[a-z0-9][a-z0-9.-]{0,252})/[a-z0-9][a-z0-9-]{0,62}\] ")
CTIME = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"
MPI_TAG = re.compile(
    rf"^(?:{CTIME})?(?:\[[\w.@-]{{1,64}},\d{{1,7}}\]"
    r"(?:\[(?P<h>[A-Za-z0-9][\w.-]{0,62}):\d{1,10}\])?)?<std(?:out|err|diag)>: ?"
)
# Ray's worker prefix: "({actor or task name} pid={pid}, ip={ip}) ", the actor's own __repr__
# in its name's place where its class defines one ("(MyActor(index=2) pid=482120) ", Ray's
# "Customizing prefixes for Actor logs", https://docs.ray.io/en/latest/ray-observability/
# user-guides/configure-logging.html)
RAY = re.compile(
    r"^\((?:raylet|(?:[^\s()]{1,200}(?:\([^()\n]{0,200}\))? )?pid=\d{1,10})"
    r"(?:, ip=(?P<h>[\w.:-]{1,64}))?\) "
)
# Determined's task log line: "[time] <container id, 8 wide or 8 spaces> [rank=N] || LEVEL: "
DETERMINED = re.compile(
    rf"^\[{RFC3339}\] (?:[\w.-]{{1,8}}| {{8}}) (?:\[rank=(?P<rank>\d{{1,7}})\] )?\|\|(?: |$)"
    r"(?:(?:TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL|UNSPECIFIED): )?"
)
# `docker service logs` (docker/cli cli/command/service/logs.go taskFormatter.format and
# logWriter.Write): "<service>.<slot>[.<task id>]@<node>" padded, then "    |" and the line;
# the node is the swarm node's hostname (its id with --no-resolve)
SWARM = re.compile(
    r"^[A-Za-z0-9][\w.-]{0,200}?\.\d{1,5}(?:\.[a-z0-9]{1,25})?@(?P<h>[A-Za-z0-9][\w.-]{0,62})"
    r" {4,}\| ?"
)
MAX_JSON = 1 << 20  # a delivered JSON line longer than this is read as it is


# A log shipper's record: the line in "log" (Fluent Bit's tail input; its record_modifier filter
# documents adding "hostname ${HOSTNAME}", its kubernetes filter "kubernetes": {"host": node},
# https://docs.fluentbit.io/manual/pipeline/filters/record-modifier and .../filters/kubernetes),
# in "message" with "host" (Vector's journald, file and syslog sources: "host", the local
# hostname, https://vector.dev/docs/reference/configuration/sources/file/; its kubernetes_logs
# source's "kubernetes": {"pod_node_name": ...}, .../sources/kubernetes_logs/), or in GELF's
# "short_message" with "host" (https://go2docs.graylog.org/current/getting_in_log_data/
# gelf.html: "the name of the host, source or application that sent this message"), in Splunk
# HEC's "event" with "host" (https://docs.splunk.com/Documentation/Splunk/latest/Data/
# FormateventsforHTTPEventCollector), or in "message" with Elastic Common Schema's host object
# (Filebeat, Elastic Agent: "host": {"hostname": ..., "name": ...}, host.hostname "what the
# hostname command returns", https://www.elastic.co/guide/en/ecs/current/ecs-host.html; Filebeat's
# add_kubernetes_metadata "kubernetes": {"node": {"name": ...}}, https://www.elastic.co/guide/en/
# beats/filebeat/current/exported-fields-kubernetes-processor.html), nested or, as an
# Elasticsearch document's _source may hold them, dotted ("host.name"). Loki's `logcli query
# --output=jsonl` (grafana/loki pkg/logcli/output/jsonl.go) writes {"labels", "line",
# "timestamp"}, the stream's labels naming its host as LOKI_HOST_LABELS says.
_SHIPPED_LINE = ("log", "message", "short_message", "event", "line")
_SHIPPED_HOST = ("hostname", "host", "host.hostname", "host.name", "kubernetes.node.name")
# The labels a Loki stream names its node with, by the conventions of its agents: "host" (the
# Loki docker driver's, https://grafana.com/docs/loki/latest/send-data/docker-driver/),
# "node_name" (the promtail Helm chart's relabelling of __meta_kubernetes_pod_node_name),
# "node" (promtail's earlier Kubernetes config), "hostname" (a journal scrape's relabelled
# __journal__hostname). "instance" is left out: promtail's Kubernetes configs set it to the pod.
LOKI_HOST_LABELS = ("host", "hostname", "node_name", "node")


def loki_host(labels: dict[str, object]) -> str | None:
    """The host a Loki stream's labels name: the one value its host labels agree on; labels
    naming two different hosts name none (which one the line is about is not known)."""
    found = {v.lower(): v for k in LOKI_HOST_LABELS if isinstance(v := labels.get(k), str)}
    return next(iter(found.values())) if len(found) == 1 else None


# The keys that say a record with no host is still a shipper's, its line in the keys above:
# ECS's required "@timestamp", Vector's "source_type", Fluent Bit stdout's json_lines "date"
# (fluent/fluent-bit plugins/out_stdout/stdout.c, json_date_key "date"), logcli's "labels".
_SHIPPED_MARK = ("@timestamp", "source_type", "date", "labels")


def _nested(obj: object, *path: str) -> object:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _shipped_host(obj: dict[str, object]) -> object:
    """The host a shipper's record names: Kubernetes metadata's, a flat key's, or ECS's."""
    for path in (("kubernetes", "host"), ("kubernetes", "node", "name")):
        if isinstance(found := _nested(obj, *path), str):
            return found
    if isinstance(found := _nested(obj, "kubernetes", "pod_node_name"), str):
        return found
    ecs, labels = obj.get("host"), obj.get("labels")
    if isinstance(ecs, dict):
        return next((ecs[k] for k in ("hostname", "name") if isinstance(ecs.get(k), str)), None)
    if isinstance(labels, dict) and isinstance(obj.get("line"), str):
        return loki_host(labels)
    return next((obj[k] for k in _SHIPPED_HOST if isinstance(obj.get(k), str)), None)


def _complete(obj: dict[str, object], default: bool) -> bool:
    """Whether a record holds a whole line: Fluent Bit's CRI parser keeps the runtime's P/F
    tag as "logtag" (its parsers.conf "cri" regex), a partial line "P"."""
    tag = obj.get("logtag")
    return tag != "P" if isinstance(tag, str) else default


def _shipped(obj: dict[str, object]) -> tuple[str, str | None, bool] | None:
    """(message, host, complete) of a shipper's record that names its host or carries a
    shipper's own key, else None."""
    source = obj.get("_source")
    if isinstance(source, dict) and "_index" in obj:  # an Elasticsearch/OpenSearch search hit
        obj = source
    host = _shipped_host(obj)
    line = next((obj[k] for k in _SHIPPED_LINE if isinstance(obj.get(k), str)), None)
    if not isinstance(line, str) or "involvedObject" in obj:
        return None
    if not isinstance(host, str) and not any(k in obj for k in _SHIPPED_MARK):
        return None
    return (
        line.removesuffix("\n").removesuffix("\r"),
        host if isinstance(host, str) else None,
        _complete(obj, True),
    )


def json_record(line: str) -> tuple[str, str | None, bool] | None:
    """(message, host as written, complete) of a docker json-file, a log shipper's or a
    journalctl -o json line."""
    if not (line.startswith("{") and line.endswith("}")) or len(line) > MAX_JSON:
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    shipped = _shipped(obj)
    if shipped is not None:
        return shipped
    if isinstance(obj.get("log"), str) and ("stream" in obj or "time" in obj):
        log: str = obj["log"]
        return log.removesuffix("\n").removesuffix("\r"), None, _complete(obj, log.endswith("\n"))
    msg = obj.get("MESSAGE")
    if isinstance(msg, list) and all(isinstance(b, int) and 0 <= b < 256 for b in msg):
        msg = bytes(msg).decode("utf-8", errors="replace")
    if isinstance(msg, str):
        host = obj.get("_HOSTNAME")
        return msg, host if isinstance(host, str) else None, True
    return None


def undelivered_line(line: str) -> str:
    """One line without the delivery only a runtime or launcher writes (a CRI or json-file
    record, Determined's task-log prefix, kubectl's --prefix, docker service logs' task,
    Open MPI's tag, Ray's worker prefix); else the line itself.

    A partial record (a line the runtime split) is read as it is: the parsers take one line
    at a time, and the rest arrives as the next record.
    """
    m = CRI.match(line)
    if m:
        line = line[m.end() :]
    elif (rec := json_record(line)) is not None:
        line = rec[0]
    for pattern in (DETERMINED, KUBE_PREFIX, SWARM, MPI_TAG, RAY):
        m = pattern.match(line)
        if m:
            line = line[m.end() :]
    return line
