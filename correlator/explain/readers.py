"""Raw text of any supported kind -> timeline Events, each carrying its verbatim line(s).

Order: structured tool readers (sacct, nvidia-smi, dcgm-exporter, dcgmi diag, dmon) first, then the
collector's kernel-log and job-log parsers on the remaining lines, then the pattern rules on
any line that nothing else understood. Hosts are attached only where the text names them.
"""

from __future__ import annotations

import logging
import re

from collector.parse.joblog import parse_job_text, with_label
from collector.parse.kernel import parse_kernel_text
from correlator.explain.hosts import (
    clean_host,
    host_in_line,
    prefix_hosts,
    shared_prefix,
)
from correlator.explain.hosts_blocks import block_hosts, hydra_block_hosts
from correlator.explain.hosts_fields import session_hosts
from correlator.explain.hosts_records import logentry_hosts
from correlator.explain.readers_gpu import _event
from correlator.explain.readers_ray import ray_dead_nodes
from correlator.explain.readers_sched import context_hosts
from correlator.explain.readers_structured import HEALTH, read_structured
from correlator.explain.readers_suspects import read_from, suspects
from correlator.explain.readers_ucx import ucx_gid_peers
from correlator.explain.wrappers import Delivered, undelivered
from correlator.rules import PATTERNS, classify_event, first_rule
from timeline.models import Event, EventKind

log = logging.getLogger(__name__)


def _parsed(rest: str) -> list[Event]:
    events: list[Event] = []
    for name, parse in (("kernel", parse_kernel_text), ("joblog", parse_job_text)):
        try:
            events += parse(rest)
        except Exception as exc:
            HEALTH.error(f"{name} parser failed", exc)
    return events


def reads_fault(text: str) -> bool:
    """Whether `text` alone reads as a kind of failure (not a wrapper or noise): by a pattern
    rule, or as an event the kernel or job-log parser reads (the driver's Xid lines)."""
    found = first_rule(text)
    if found is not None and found[1].category is not None:
        return True
    return any((v := classify_event(ev)) and v.category is not None for ev in _parsed(text))


def _first_rule(text: str) -> str | None:
    """The name of the rule that reads `text` alone, as the correlator's rules read it."""
    found = first_rule(text)
    return found[0].name if found else None


# A line this long may have been wrapped by a terminal or a paste (at 72-80 columns).
_WRAP_AT = 60


def _continues(line: str, nxt: str) -> bool:
    """Whether `nxt` may be the wrapped rest of `line` (indented, or `line` is wrap-long and
    `nxt` means nothing alone)."""
    if not nxt.strip():
        return False
    if nxt[:1].isspace():
        return True
    return len(line.rstrip()) >= _WRAP_AT and _first_rule(nxt) is None


# A help text's value on its own indented line below the sentence that introduces it, after at
# most one blank line (Open MPI: "...its daemon located on node:" / "" / "  hostname:  gpu-07").
_VALUE_BELOW = re.compile(r"^\s*[A-Za-z][\w ]{0,30}:\s+\S+\s*$")


# The rules that read a node or peer out of the line: the only reason to join two lines.
_READS_A_NODE = frozenset(r.name for r in PATTERNS if "peer" in r.regex.groupindex)


def _rest_of(lines: list[str], i: int) -> int | None:
    """The line that may carry the rest of line i: a value below it, or its wrapped tail
    (cheap shape tests only; the rules decide afterwards)."""
    line = lines[i].rstrip()
    if line.endswith(":"):
        for j in (i + 1, i + 2):
            if j >= len(lines) or (lines[j].strip() and not _VALUE_BELOW.match(lines[j])):
                return None
            if lines[j].strip():
                return j
        return None
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    # cut mid-phrase (no sentence end) and continued at the next line's start
    wrapped = len(line) >= _WRAP_AT and line[-1:].isalnum() and nxt[:1].isalnum()
    return i + 1 if wrapped else None


def joined_rests(lines: list[str]) -> tuple[list[str], dict[str, str]]:
    """The lines, each joined with the rest of it on a line below (the value under a help text's
    "...on node:", a terminal-wrapped tail) where only the whole names what a more specific
    rule reads (the node), the rest's own line then left empty; and for each joined line the
    two lines as the text has them (evidence is quoted verbatim)."""
    out, verbatim = list(lines), {}
    for i, line in enumerate(lines):
        j = _rest_of(lines, i) if out[i] == line else None
        alone = _first_rule(line) if j is not None else None
        if j is None or alone is None or _first_rule(lines[j]) is not None:
            continue  # a line that means something alone is not the rest of another
        joined = f"{line.rstrip()} {lines[j].strip()}"
        whole = _first_rule(joined)
        if whole is not None and whole != alone and whole in _READS_A_NODE:
            out[i], out[j] = joined, ""
            verbatim[joined.strip()] = f"{line}\n{lines[j]}"
    return out, verbatim


def _wraps(line: str, nxt: str, delivered: str) -> bool:
    """Whether `nxt` (the next line, a shared pdsh prefix taken off) is the wrapped rest of
    `line`: _continues, or a wrap-long line whose whole names a node that the rest as delivered
    does not (prterun's "... on node H exited on" / "signal 11 (Segmentation fault).")."""
    if _continues(line, nxt):
        return True
    if len(line.rstrip()) < _WRAP_AT or not nxt.strip():
        return False
    whole = _first_rule(f"{line.rstrip()} {nxt.strip()}")
    return whole in _READS_A_NODE and whole != _first_rule(delivered)


def _fallback(
    lines: list[str], skip: set[int], hints: list[str | None], bare: list[str] | None = None
) -> list[Event]:
    """Events of the lines a pattern rule reads, each line read as delivered (its pdsh prefix
    on) and, when that reads nothing, as `bare` has it: a rule anchored at the line's start
    (a Python exception's "ValueError: ...") reads a relayed line only without its prefix."""
    events: list[Event] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i in skip or not line.strip():
            i += 1
            continue
        rule, raw, msg, at = _first_rule(line), line, line, i
        if rule is None and bare is not None and bare[i] != line:
            rule, msg = _first_rule(bare[i]), bare[i]
        # a wrapped tail relayed by pdsh carries the same "host: " prefix as its head: the rules
        # read the tail without it, the evidence quotes both lines as delivered
        tail = lines[i + 1] if i + 1 < len(lines) else ""
        nxt = shared_prefix(line, tail)
        if rule is None and i + 1 not in skip and _wraps(line, nxt, tail):
            joined = f"{line.rstrip()} {nxt.strip()}"  # a terminal-wrapped line
            rule, raw, msg = _first_rule(joined), f"{line}\n{tail}", f"{line}\n{nxt}"
            if rule is not None:
                i += 1
        if rule is not None:
            node = hints[at] or host_in_line(line)
            events.append(
                _event(EventKind.OTHER, raw, msg.strip(), node=node, payload={"pattern": rule})
            )
        i += 1
    return events


def _attach_hosts(
    events: list[Event],
    texts: tuple[list[str], ...],
    hints: list[str | None],
    subjects: list[str | None],
) -> None:
    """Name each event's node: its parser's, else the block its line belongs to (`subjects`,
    which outranks the syslog or journal host that logged the line), else the line's own host
    convention, else its context (`hints`)."""
    index: dict[str, int] = {}
    # the same line delivered from two hosts (journald or a shipper's records of one message
    # on both) is neither's: the event read from it cannot say which host logged it
    several: set[str] = set()
    for lines in texts:  # the parsers read the lines without their pdsh prefix
        for n, line in enumerate(lines):
            seen = index.setdefault(line.strip(), n)
            a, b = hints[seen], hints[n]
            if a and b and a.lower() != b.lower():
                several.add(line.strip())
    for ev in events:
        if ev.node:
            ev.node = clean_host(ev.node)
            continue
        first = (ev.raw or "").splitlines()[0].strip() if ev.raw else ""
        host = ev.payload.get("host") if isinstance(ev.payload.get("host"), str) else None
        at = None if first in several else index.get(first)
        if at is None:
            ev.node = clean_host(host) or host_in_line(first)
        else:
            ev.node = clean_host(host) or subjects[at] or host_in_line(first) or hints[at]


def unprefixed(lines: list[str], found: list[str | None] | None = None) -> list[str]:
    """The lines without the "host: " prefix pdsh/clush (DeepSpeed's multinode runner) puts in
    front of each remote line, where prefix_hosts found one (`found`, if already known): the
    job-log parser's multi-line blocks (a ChildFailedError table, "Last error:") start at the
    line's own beginning."""
    # prefix_hosts names every line that opens with a kept "host: " prefix, a known host's
    # indented lines ("gpu-01:   time      : ...") too
    found = prefix_hosts(lines, reads_fault) if found is None else found
    # the prefix runs to the line's first ": " (a host name has none; slurmstepd's
    # "slurmstepd-<node>: " prefix is longer than the node it names)
    return [ln[ln.index(": ") + 2 :] if h else ln for h, ln in zip(found, lines, strict=True)]


def stream_groups(keys: list[str | None], lines: list[str]) -> list[list[int]] | None:
    """The line indices of each delivered stream (streams in order of first appearance, each
    in its own order), or None when the text is one stream. pdsh, kubectl --prefix and Open
    MPI's tags interleave whole lines of several hosts, so another host's line (or a pasted one
    that no delivery names) can fall inside one host's multi-line record (a torchrun
    ChildFailedError table), which the job-log parser would read as part of it. A blank or
    indented line that no delivery names stays with the stream before it (it may end or
    continue a record); other such lines are one stream of their own."""
    if not any(keys):
        return None
    key: list[str] = []
    for k, line in zip(keys, lines, strict=True):
        tail = not line.strip() or line[:1].isspace()
        key.append(k.lower() if k else (key[-1] if key and tail else ""))
    if len(set(key)) < 2:
        return None
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(key):
        groups.setdefault(k, []).append(i)
    return list(groups.values())


def _parsed_by_stream(rest: list[str], keys: list[str | None]) -> list[Event]:
    """_parsed over each delivered stream's lines on their own, the events in reading order:
    each host's log is its own, so one host's line is never a flood repeat or a continuation
    of another's (two hosts' identical Xid lines behind pdsh are two events)."""
    groups = stream_groups(keys, rest)
    if groups is None:
        return _parsed("\n".join(rest))
    events = [ev for g in groups for ev in _parsed("\n".join(rest[i] for i in g))]
    at: dict[str, int] = {}
    for i, line in enumerate(rest):
        at.setdefault(line.strip(), i)

    def first_line(ev: Event) -> int:
        raw = (ev.raw or ev.message or "").strip().split("\n", 1)[0].strip()
        return at.get(raw, len(rest))

    return sorted(events, key=first_line)


def _with_delivery_hosts(
    lines: list[str], hints: list[str | None], delivery: list[str | None]
) -> list[str | None]:
    """Each line's host: its context's, else (where the line names none itself) the host its
    delivery named (Ray's ip=, journald's _HOSTNAME, kubectl's pod, Open MPI's tag-detailed)."""
    return [
        hint or (None if not host or host_in_line(line) else host)
        for line, hint, host in zip(lines, hints, delivery, strict=True)
    ]


def _verbatim(events: list[Event], verbatim: dict[str, str]) -> list[Event]:
    """The events, a joined line's evidence quoted as the two lines the text has."""
    for ev in events:
        ev.raw = verbatim.get((ev.raw or "").strip(), ev.raw)
    return events


def _labelled(events: list[Event], labels: dict[str, dict[str, int]]) -> None:
    """Give each event what its line's launcher label said (a torchrun rank, an srun task), in
    the payload keys the agent's job-log parser uses, so both paths carry the same event."""
    for ev in events:
        first = (ev.raw or ev.message).splitlines()[0].strip() if (ev.raw or ev.message) else ""
        if label := labels.get(first):
            ev.payload = with_label(ev.payload, label)


def read_events(text: str) -> list[Event]:
    """Every failure-relevant event the text shows, in reading order."""
    return read(text)[0]


def read(text: str) -> tuple[list[Event], list[str]]:
    """(events, every host the text names by a known convention) in one pass over the text."""
    events, hosts, _, _ = read_delivered(text)
    return events, hosts


def read_delivered(text: str) -> tuple[list[Event], list[str], Delivered, list[str]]:
    """read(), the delivery taken off the text (to quote evidence as it was delivered), and the
    hosts the text names on lines that may show them at fault (hosts_health.not_at_fault: not
    a status view's healthy row, a prompt that owns no failure or a "host: " stream without
    one), the last resort's candidates: of those, the ones seen on some other line than a
    healthy run's progress lines (hosts_health.progress_lines), when there are any."""
    delivered = undelivered(text)
    lines = delivered.lines
    if delivered.verbatim:  # read what the emitters wrote, not the delivery around it
        text = "\n".join(lines)
    found = prefix_hosts(lines, reads_fault)
    source = unprefixed(lines, found)
    delivered.quote_unprefixed(source)
    # a tool's output delivered through pdsh ("gpu-07: ECC Errors") is read without the prefix
    structured = read_structured(text, source)
    bare, verbatim = joined_rests(source)
    rest = ["" if i in structured.claimed else ln for i, ln in enumerate(bare)]
    keys = [p or d for p, d in zip(found, delivered.hosts, strict=True)]
    parsed = _verbatim(_parsed_by_stream(rest, keys), verbatim)
    covered = {raw.strip() for ev in parsed for raw in (ev.raw or "").splitlines()}
    # a Hydra termination block is about its RUNNING AT node, also where syslog or the journal
    # logged it on another host
    hydra = hydra_block_hosts(lines)
    # a table row's or describe block's host, else the Cloud Logging record's (or journal
    # entry's) the line is in, else the node a shell session shows (hostname's output, ssh's)
    context = [
        c or e or clean_host(o)
        for c, e, o in zip(
            context_hosts(lines, prefixed=found, hydra=hydra),
            logentry_hosts(lines),
            session_hosts(lines),
            strict=True,
        )
    ]
    named = _with_delivery_hosts(lines, context, delivered.hosts)
    # a fan-out tool's block header (clush -b, Ansible, pssh -i) names the host of each line
    # below it, but not as a host the whole text is about: a healthy node's block must not
    # make it the culprit of a fault another block shows for several nodes at once
    # (a line whose own convention names another host, pdsh's or syslog's, ends the block)
    own = [p or host_in_line(ln) for p, ln in zip(found, lines, strict=True)]
    hints = [h or b for h, b in zip(named, block_hosts(lines, own), strict=True)]
    skip = structured.claimed | {
        i
        for i, (a, b) in enumerate(zip(bare, lines, strict=True))
        if {a.strip(), b.strip()} & covered
    }
    # the pattern rules read the pdsh prefix too; without one, both readings are the same
    joined, verbatim = (bare, verbatim) if source is lines else joined_rests(lines)
    fallback = _fallback(joined, skip, hints, None if source is lines else bare)
    events = structured.events + parsed + _verbatim(fallback, verbatim)
    _attach_hosts(events, (bare, lines), hints, hydra)
    _labelled(events, delivered.labels)
    ucx_gid_peers(events, lines)
    ray_dead_nodes(events, lines)
    each = [named[i] or host_in_line(ln) for i, ln in enumerate(lines)]
    # a host that a line names in a healthy status, at an idle prompt, in a stream of its own
    # without the failure or only in losses is no last resort
    read = read_from(events, delivered, (lines, source))
    hosts = [h for h in each if h]
    return events, hosts, delivered, suspects(lines, each, read, found)
