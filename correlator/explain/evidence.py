"""The lines an explanation quotes: what its verdict and its culprit rest on, as pasted."""

from __future__ import annotations

import re

from correlator.explain.hosts import host_in_line
from correlator.explain.reasoning import Conclusion
from correlator.explain.wrappers import Delivered
from timeline.models import Event, EventKind

EVIDENCE_LINES = 6

# torch's ChildFailedError.format_msg (torch/distributed/elastic/multiprocessing/errors/
# __init__.py): a title, a "=" border, "<script> FAILED", "Failures:" and the other ranks'
# entries, a "-" divider, "Root Cause (first observed failure):" and its entry, a border. Each
# entry (_format_failure) is "[<rank>]:" then "  time      : ", host, rank, exitcode,
# error_file and traceback fields; the verdict reads the root cause's host, rank, exit code and
# the signal its traceback names (collector/parse/joblog_launch.failure_entry).
# Read with match/fullmatch only: \A says so (a search would retry every position of a long
# blank or '_' run), and the possessive runs are followed by what they cannot take, so each
# matches what the plain run did (same lines matched).
_ENTRY = re.compile(r"\A\s*+\[-?\d++\]:\s*+")
_READ_FIELDS = re.compile(r"\A(?:\s*+(?:host|rank|exitcode)\s*+:|\s*+traceback\s*+:.*\bSignal \d+)")
_FIELD = re.compile(r"\A\s*+[a-z_]++\s*+: ?")
# the read lines looked up in the text (a table's header above a row, the first quoted line):
# as many as a quote can take, with room for blank and repeated ones
_LOOKED_UP = 4 * EVIDENCE_LINES


def _entry(lines: list[str]) -> list[str]:
    """The root cause's entry of a ChildFailedError block (else its first entry), less the
    fields the verdict does not read."""
    root = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Root Cause")), 0)
    start = next((i for i in range(root, len(lines)) if _ENTRY.fullmatch(lines[i])), None)
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(lines)) if not _FIELD.match(lines[i])), len(lines))
    return [lines[start], *(ln for ln in lines[start + 1 : end] if _READ_FIELDS.match(ln))]


def event_lines(event: Event) -> list[str]:
    """The read lines an event quotes: each line of a multi-line event, but of a
    ChildFailedError block its title and the entry the verdict reads, not the borders and the
    other ranks' entries ahead of it that would fill the quote; first the lines its reader read
    it by, when it kept them."""
    lines = (event.raw or event.message).rstrip("\n").split("\n")
    # the lines a reader read the event by, above the one it quotes (readers_k8s.py)
    read_by = event.payload.get("read_by")
    if isinstance(read_by, list):
        return [*(ln for ln in read_by if isinstance(ln, str)), *lines]
    long_block = event.kind is EventKind.CHILD_FAILED and len(lines) > EVIDENCE_LINES
    entry = _entry(lines[1:]) if long_block else []
    return [lines[0], *entry] if entry else lines


def names_host(line: str, host: str) -> bool:
    """Whether `line` names `host` as a whole name (not "node1" within "node10")."""
    return re.search(rf"(?<![\w.-]){re.escape(host)}(?!\w)", line, re.IGNORECASE) is not None


def _position(lines: list[str], read: str) -> int | None:
    """The index of the first of `lines` that is the read line `read`, else that holds it."""
    s = read.strip()
    if not s:
        return None
    same = next((i for i, ln in enumerate(lines) if ln.strip() == s), None)
    return same if same is not None else next((i for i, ln in enumerate(lines) if s in ln), None)


def _culprit_line(lines: list[str], node: str, read: list[str]) -> tuple[str, bool] | None:
    """The line naming `node` that the quote lacks, and whether it is above the quoted lines:
    the first one above them (a describe block's "Name:", scontrol's "NodeName=", the prompt or
    header a block of output is under), else the first below; a line that reads as naming a
    host first."""
    at = [p for r in read if (p := _position(lines, r)) is not None]
    first = min(at) if at else len(lines)
    naming = [i for i, ln in enumerate(lines) if names_host(ln, node)]
    # a line that reads as naming its host ("Hostname: X", "NodeName=X") before one that only
    # mentions it (a command line, a label)
    naming = [i for i in naming if (host_in_line(lines[i]) or "").lower() == node.lower()] or naming
    above = [i for i in naming if i < first]
    pick = above[0] if above else (naming[0] if naming else None)
    return None if pick is None else (lines[pick], bool(above))


def quoted_evidence(
    conclusion: Conclusion, delivered: Delivered, pieces: dict[str, str], node: str | None
) -> list[str]:
    """The evidence lines as pasted, at most EVIDENCE_LINES of the support, and the line that
    names the culprit when none of those does: a verdict's node read from a header, a table's
    host column or a prompt is shown, not only asserted."""
    read = [ln for f in conclusion.support for ln in event_lines(f.event)]
    # only the first lines can be quoted: a long log's thousand repeats are not looked up
    head = _with_headers(read[:_LOOKED_UP], delivered.lines)
    evidence = _as_pasted([*head, *read[_LOOKED_UP:]], delivered, pieces, EVIDENCE_LINES)
    if node and not any(names_host(ln, node) for ln in evidence):
        found = _culprit_line(delivered.lines, node, head)
        if found is not None:
            pasted = _as_pasted([found[0]], delivered, pieces, EVIDENCE_LINES)
            # of a rejoined line, the pasted piece that names the culprit
            extra = [ln for ln in pasted if names_host(ln, node) and ln not in evidence][:1]
            # in reading order: a header above the quoted lines comes first
            evidence = [*extra, *evidence] if found[1] else [*evidence, *extra]
    return evidence


def _table_header(lines: list[str], row: int) -> int | None:
    """The header of the "|"-separated table (sacct -P, sinfo -o, squeue -o) whose row is
    lines[row]: the first of the lines above it with as many cells, when there is one."""
    cells = lines[row].count("|")
    if cells < 2:
        return None
    top = row
    while top > 0 and lines[top - 1].count("|") == cells:
        top -= 1
    return top if top < row else None


def _with_headers(read: list[str], lines: list[str]) -> list[str]:
    """`read` with the header of each table a quoted row is in, above its first row: the row's
    host and state are read by its header's column names."""
    out: list[str] = []
    for ln in read:
        at = _position(lines, ln) if ln.count("|") >= 2 else None
        head = None if at is None else _table_header(lines, at)
        if head is not None and lines[head] not in out:
            out.append(lines[head])
        out.append(ln)
    return out


def _as_pasted(
    read: list[str], delivered: Delivered, pieces: dict[str, str], cap: int
) -> list[str]:
    """`read` lines as the delivered text has them, a rejoined line as its pasted pieces."""
    out: list[str] = []
    for ln in read:
        raw = delivered.quoted(ln)
        for line in "\n".join(pieces.get(p, p) for p in raw.splitlines()).splitlines():
            if line.strip() and line not in out and len(out) < cap:
                out.append(line)
    return out
