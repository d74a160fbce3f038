"""The text wrappers of the log-aggregation tools a cluster's logs are read back through, taken
off every line before a runtime's record (CRI, json-file) inside is read: an aggregator stores
the line as its shipper delivered it, and prints it back inside its own prefix. The formats
and their sources are cited in correlator/explain/wrappers.py; the JSON ones (logcli's jsonl,
Fluent Bit's json_lines, Vector's console sink, Elasticsearch's _source) are shipper records,
read by collector/parse/delivery.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from collector.parse.delivery import loki_host
from correlator.explain.hosts import clean_host

# the host-and-program shape of a syslog/journalctl short line after its time stamp
SYSLOG_REST = re.compile(r"^[A-Za-z0-9][\w.-]{0,62} [\w./@-]{1,64}(?:\[\d{1,10}\])?: ")

# logcli query's default output (grafana/loki pkg/logcli/output/default.go): time.RFC3339 (no
# fraction), the stream's labels as loghttp.LabelSet.String() writes them ('{a="b", c="d"}',
# names sorted, values strconv.Quote'd; the labels every stream shares left out, so "{}" when
# one stream) padded to the widest, a space, and the line with its spaces trimmed
_LABEL = r'[A-Za-z_][A-Za-z0-9_]{0,127}="(?:[^"\\]|\\.){0,1024}"'
_LOKI = re.compile(
    rf"^\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:Z|[+-]\d\d:\d\d) "
    rf"(?P<labels>\{{(?:{_LABEL}(?:, {_LABEL}){{0,63}})?\}}) *"
)
_LOKI_PAIR = re.compile(r'(?P<k>[A-Za-z_][A-Za-z0-9_]{0,127})="(?P<v>[^"\\]{0,253})"')
# `aws logs tail` (aws/aws-cli awscli/customizations/logs/tail.py): "detailed", the default,
# isoformat(timespec='microseconds') of a UTC time, the log stream name, the message; "json"
# the same with isoformat() (no fraction when it is 0); "short" "%Y-%m-%dT%H:%M:%S" and the
# message. A stream name has no ':' or '*' (CloudWatch Logs CreateLogStream).
_AWS_DETAILED = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?[+-]\d\d:\d\d (?P<stream>[^\s:*]{1,512}) "
)
_AWS_SHORT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d ")
# the streams that name their instance: the CloudWatch agent's default {instance_id}, or an
# EC2 instance's own host name ({hostname}: "ip-10-0-1-23[.ec2.internal | .REGION.compute
# .internal]"); any other name (a Batch job's, a Lambda's, a prefix of the user's) is no host
_EC2_STREAM = re.compile(
    r"^(?:i-[0-9a-f]{8}(?:[0-9a-f]{9})?|ip-\d{1,3}(?:-\d{1,3}){3}(?:\.[a-z0-9-]{1,63}){0,4})$"
)
# `fluent-bit -o stdout` (fluent/fluent-bit plugins/out_stdout/stdout.c, format msgpack, the
# default): "[N] TAG: [" the time "%u.%09lu, " and msgpack_object_print's record, a map
# printed '{"key"=>"value", ...}' with its strings written as they are; from v2.1 the time is
# "[SEC.NSEC, {metadata}]"
_FLUENT_BIT = re.compile(
    r"^\[\d{1,10}\] [^\s]{1,256}?: \[(?:\[\d{1,10}\.\d{9}, \{[^{}]{0,4096}\}\]|\d{1,10}\.\d{9}), "
    r"(?=\{.*\}\]$)"
)
_FB_LINE = re.compile(r'"(?:log|message|MESSAGE)"=>"')
_FB_END = re.compile(r'"(?=, "[^"]{1,128}"=>|\}(?:\]$|, |\}))')
_FB_HOST = re.compile(r'"(?:host|hostname)"=>"(?P<h>[^"]{1,253})"')

Stripped = tuple[str, str | None]


def _loki(line: str) -> Stripped | None:
    m = _LOKI.match(line)
    if not m:
        return None
    host = loki_host({p["k"]: p["v"] for p in _LOKI_PAIR.finditer(m["labels"])})
    return line[m.end() :], clean_host(host) if host else None


def _aws_detailed(line: str) -> Stripped | None:
    m = _AWS_DETAILED.match(line)
    if not m:
        return None
    stream = m["stream"]
    return line[m.end() :], clean_host(stream) if _EC2_STREAM.match(stream) else None


def _aws_short(line: str) -> Stripped | None:
    m = _AWS_SHORT.match(line)
    return None if not m else (line[m.end() :], None)


def _fluent_bit(line: str) -> Stripped | None:
    m = _FLUENT_BIT.match(line)
    if not m:
        return None
    body = line[m.end() :]
    key = _FB_LINE.search(body)
    end = _FB_END.search(body, key.end()) if key else None
    if key is None or end is None:
        return None
    found = _FB_HOST.search(body[: key.start()] + body[end.end() :])
    return body[key.end() : end.start()], clean_host(found["h"]) if found else None


# (strip, whether a line with the syslog shape counts against it), in the order tried
_AGGREGATORS: tuple[tuple[Callable[[str], Stripped | None], bool], ...] = (
    (_loki, False),
    (_fluent_bit, False),
    (_aws_detailed, True),
    # journalctl's ISO stamps always carry a zone, so a zone-less one opens no syslog line
    (_aws_short, False),
)


def _shape(lines: list[str], strip: Callable[[str], Stripped | None], syslog: bool) -> bool:
    """Whether the aggregator's prefix opens most non-blank lines (it wraps each), and, for
    a prefix a syslog line also has, most of those lines are not syslog-shaped."""
    filled = [ln for ln in lines if ln.strip()]
    hits = [ln for ln in filled if strip(ln) is not None]
    if not filled or len(hits) * 2 <= len(filled):
        return False
    if not syslog:
        return True
    shaped = sum(1 for ln in hits if SYSLOG_REST.match(ln[ln.index(" ") + 1 :]))
    return shaped * 2 <= len(hits)


def unaggregated(lines: list[str]) -> tuple[list[str], list[str | None]]:
    """The lines without the prefix of the aggregator they were read back through (the first
    whose prefix opens most lines), each with the host that prefix named."""
    for strip, syslog in _AGGREGATORS:
        if not _shape(lines, strip, syslog):
            continue
        out: list[str] = []
        hosts: list[str | None] = []
        for line in lines:
            got = strip(line)
            out.append(line if got is None else got[0])
            hosts.append(None if got is None else got[1])
        return out, hosts
    return lines, [None] * len(lines)
