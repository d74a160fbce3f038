"""The last resort's candidates among the hosts a text names: the lines each host shows at
fault, less those only healthy, idle, progress or loss lines (explain's readers.read_delivered
uses them when a fault's own lines name no host)."""

from __future__ import annotations

from correlator.explain.hosts_health import losers, not_at_fault, progress_lines
from correlator.explain.reasoning_peers import reports_loss
from correlator.explain.wrappers import Delivered
from correlator.rules import classify_event
from timeline.models import Event


def suspects(
    lines: list[str],
    each: list[str | None],
    read: tuple[list[bool], list[bool], list[bool]],
    found: list[str | None],
) -> list[str]:
    """The last resort's candidates: hosts named on lines that may show them at fault, of
    those the ones seen beyond a healthy run's progress lines when there are any (`read`: the
    lines with any reading, those read as a failure, and those read only as a loss)."""
    failing, failed, lost = read
    quiet = not_at_fault(lines, each, failing, found)
    # a host whose every failure line reports a loss (a timeout, a peer's error) is no suspect
    out = losers(lines, each, failed, lost)
    suspects = [h for h, q in zip(each, quiet, strict=True) if h and not (q or h.lower() in out)]
    # a host seen only in a healthy run's progress lines (NCCL init, srun -v's launch) is no
    # suspect while another host may be: the other ranks of a job print them too; a progress
    # line a rule reads as no failure (NCCL's net plugin fallback) is still one
    progress = progress_lines(lines, failed)
    busy = {h.lower() for h, q, p in zip(each, quiet, progress, strict=True) if h and not (q or p)}
    return [h for h in suspects if h.lower() in busy] or suspects


def read_from(
    events: list[Event], delivered: Delivered, texts: tuple[list[str], list[str]]
) -> tuple[list[bool], list[bool], list[bool]]:
    """For each line (as delivered or without its pdsh prefix), whether an event that means
    something (a finding's, reasoning.findings) was read from it (an event quotes a line as
    pasted, Delivered.verbatim's values), whether one that means a failure was: a kind of
    failure or a cause, not a rule's reading of a notice as no failure (category None and no
    root cause, as reasoning.conclude tells them apart), and whether every failure read from
    it only reports a loss (reasoning_peers.reports_loss)."""
    on = (delivered, texts)
    verdicts = [(ev, classify_event(ev)) for ev in events]
    meant = [ev for ev, v in verdicts if v is not None]
    failed = [(ev, v) for ev, v in verdicts if v is not None and (v.category or v.root_cause)]
    loss = [reports_loss(v, ev.raw or ev.message or "", ev.node) for ev, v in failed]
    lost = [ev for (ev, _), x in zip(failed, loss, strict=True) if x]
    owned = _lines_of([ev for (ev, _), x in zip(failed, loss, strict=True) if not x], *on)
    failing = _lines_of([ev for ev, _ in failed], *on)
    only_lost = [x and not o for x, o in zip(_lines_of(lost, *on), owned, strict=True)]
    return _lines_of(meant, *on), failing, only_lost


def _lines_of(
    events: list[Event], delivered: Delivered, texts: tuple[list[str], list[str]]
) -> list[bool]:
    raw = {ln.strip() for ev in events for ln in (ev.raw or ev.message or "").splitlines()}
    raw |= {k.strip() for k, v in delivered.verbatim.items() if v.strip() in raw}
    return [a.strip() in raw or b.strip() in raw for a, b in zip(*texts, strict=True)]
