"""Cloud Logging LogEntry records as `gcloud logging read` prints them by default: YAML, one
document per entry, "---" between them.

gcloud logging read (https://cloud.google.com/sdk/gcloud/reference/logging/read) prints its
entries in gcloud's default resource format, YAML, unless --format asks for another (its own
example adds --format=json); gcloud's yaml printer (https://cloud.google.com/sdk/gcloud/
reference/topic/formats: "yaml: Prints the YAML representations of JSON-serializable objects";
each resource a document, "---" between them) writes the LogEntry's fields as block mappings,
two spaces a level, keys sorted (insertId, labels, logName, protoPayload, resource, ...), so an
audit entry reads "protoPayload:" / "  resourceName: projects/P/zones/Z/instances/NAME" and
"resource:" / "  type: gce_instance". Only the plain block mappings those fields use are read
here; flow collections, anchors and multi-line scalars are not needed to find them.
"""

from __future__ import annotations

import re

_KEYS = ("insertId:", "logName:")
_PAIR = re.compile(r"^( *)(- +)?('[^']*'|\"[^\"]*\"|[^\s:'\"][^:]*?):(?: +(.*?))?\s*$")
_TOP = re.compile(r"^(?:[A-Za-z@'\"][^:]*:(?: |$)|- |---$| )")


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def yaml_record_spans(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line of each YAML document that is a LogEntry (a top-level insertId: or
    logName: key), its "---" separators left out."""
    if not any(line.startswith(_KEYS) for line in lines):
        return []
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, line in enumerate([*lines, "---"]):
        inside = line.strip() and line.rstrip() != "---" and _TOP.match(line)
        if inside and start is None:
            start = i
        elif not inside and start is not None:
            if any(ln.startswith(_KEYS) for ln in lines[start:i]):
                spans.append((start, i - 1))
            start = None
    return spans


def block_mapping(lines: list[str]) -> dict[str, object]:
    """The nested mapping YAML block lines spell (scalars kept as strings); list items and
    lines that are no "key: value" pair are skipped, with what nests under them."""
    root: dict[str, object] = {}
    stack: list[tuple[int, dict[str, object] | None]] = [(-1, root)]
    for line in lines:
        m = _PAIR.match(line)
        if not m:
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else None
        if m.group(2) or parent is None:  # a list item: what it holds is not read
            stack.append((indent, None))
            continue
        key, value = _unquoted(m.group(3).strip()), m.group(4)
        if value:
            parent[key] = _unquoted(value)
            stack.append((indent, None))
        else:
            child: dict[str, object] = {}
            parent[key] = child
            stack.append((indent, child))
    return root
