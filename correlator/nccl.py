"""Culprit among victims: when many ranks of a job time out in NCCL, which host stopped first."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from correlator.attribution import HARDWARE, Ev, best_cause
from correlator.holdings import AllocationIndex, JobRef
from timeline.models import EventKind

# torchrun's ChildFailedError report: "Root Cause (first observed failure): ... host : node-3".
_HOST_RE = re.compile(r"\bhost\s*:\s*([A-Za-z0-9_.\-]+)")
_RANK_RE = re.compile(r"\brank\s*:\s*(\d+)")
# The job's own error lines that mark a rank failing (timeouts included: they fail the rank too).
RANK_FAILURE_KINDS = frozenset(
    {EventKind.NCCL_TIMEOUT, EventKind.NCCL_ERROR, EventKind.CUDA_ERROR, EventKind.CUDA_OOM}
)


@dataclass
class Culprit:
    """Who the evidence points at, how it was found, and what is known."""

    method: str  # hardware_event | seq_lag | first_failure | child_failed | unknown
    node: str | None
    confidence: float
    summary: str
    rank: int | None = None
    cause: Ev | None = None
    facts: dict[str, object] = field(default_factory=dict)


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _rank(ev: Ev) -> int | None:
    return _int(ev.payload.get("rank"))


def _progress(ev: Ev) -> int | None:
    """The last collective this rank completed: PyTorch says so on its "last completed NCCL
    work" line; a watchdog line names the SeqNum that did NOT complete, so one less."""
    done = _int(ev.payload.get("last_completed"))
    if done is None:
        done = _int(ev.payload.get("last_completed_seq"))
    if done is not None:
        return done
    seq = _int(ev.payload.get("seq_num"))
    return None if seq is None else seq - 1


def _seq_lag(timeouts: list[Ev]) -> Culprit | None:
    progress: dict[int, tuple[int, str | None]] = {}
    for ev in timeouts:
        rank, seq = _rank(ev), _progress(ev)
        if rank is None or seq is None:
            continue
        if rank not in progress or seq > progress[rank][0]:
            progress[rank] = (seq, ev.node)
    if len(progress) < 2:
        return None
    low, high = min(s for s, _ in progress.values()), max(s for s, _ in progress.values())
    laggards = {r: n for r, (s, n) in progress.items() if s == low}
    nodes = {n for n in laggards.values() if n}
    if low == high or len(laggards) * 2 > len(progress) or len(nodes) != 1:
        return None
    node = nodes.pop()
    rank = min(laggards)
    return Culprit(
        method="seq_lag",
        node=node,
        rank=rank,
        confidence=0.7,
        summary=(
            f"rank {rank} on {node} is behind: it last completed collective {low} while "
            f"the other ranks completed {high}"
        ),
        facts={"lagging_ranks": sorted(laggards), "seq_low": low, "seq_high": high},
    )


def _first_failure(failures: list[Ev], timeouts: list[Ev], margin_s: float) -> Culprit | None:
    """A rank that failed on its own (CUDA error, NCCL error) clearly before anything else.

    Watchdog timeouts are not candidates: the first rank to time out is the one that waited
    longest, usually a victim; they only bound when the others noticed.
    """
    own = [e for e in failures if e.kind is not EventKind.NCCL_TIMEOUT and e.node]
    if not own:
        return None
    first = min(own, key=lambda e: (e.ts, e.id))
    later = [e.ts for e in own if e.node != first.node] + [e.ts for e in timeouts]
    lead = min(later) - first.ts if later else float("inf")
    if lead < margin_s:
        return None
    v = first.verdict
    shown = "before anything else was reported" if not later else f"{lead:.0f} s before the rest"
    return Culprit(
        method="first_failure",
        node=first.node,
        rank=_rank(first),
        # A first failure that is a root cause on its own (a CUDA error) is the incident.
        cause=first if v is not None and v.root_cause and v.category is not None else None,
        confidence=0.5,
        summary=f"{first.node} failed first ({first.kind.value}), {shown}",
        facts={"first_event_id": first.id, "lead_s": round(lead, 3) if later else None},
    )


def _child_failed(child_failed: list[Ev], job_nodes: set[str]) -> Culprit | None:
    for ev in sorted(child_failed, key=lambda e: e.ts):
        text = "\n".join([ev.raw or "", ev.message])
        host = ev.payload.get("host") or ev.payload.get("hostname")
        if not isinstance(host, str) or not host:
            m = _HOST_RE.search(text)
            host = m.group(1) if m else None
        if not host:
            continue
        # torchrun prints the FQDN; the scheduler knows the short name.
        node = host if host in job_nodes or not job_nodes else None
        node = node or next((n for n in job_nodes if host.split(".")[0] == n), host)
        m_rank = _RANK_RE.search(text)
        return Culprit(
            method="child_failed",
            node=node,
            rank=_int(ev.payload.get("rank")) or (int(m_rank.group(1)) if m_rank else None),
            confidence=0.45,
            summary=f"torchrun's ChildFailedError names {host} as the first observed failure",
            facts={"child_failed_event_id": ev.id},
        )
    return None


def find_culprit(
    *,
    job: JobRef,
    timeouts: list[Ev],
    failures: list[Ev],
    child_failed: list[Ev],
    candidates: Iterable[Ev],
    index: AllocationIndex,
    first_fail_margin_s: float,
) -> Culprit:
    """The host that caused a multi-rank NCCL failure, by the strongest evidence available."""
    ref_ts = min((e.ts for e in timeouts), default=0.0)
    hardware = [
        c
        for c in candidates
        if c.verdict is not None and c.verdict.category in HARDWARE and c.ts <= ref_ts + 1
    ]
    cause = best_cause(hardware, job=job, index=index, ref_ts=ref_ts)
    if cause is not None and cause.verdict is not None:
        return Culprit(
            method="hardware_event",
            node=cause.node,
            cause=cause,
            confidence=max(0.75, cause.verdict.confidence),
            summary=f"{cause.node} had {cause.verdict.summary} before the timeouts",
        )
    nodes = index.nodes_of.get(job.job_id, set()) | {e.node for e in timeouts if e.node}
    for found in (
        _seq_lag(timeouts),
        _first_failure(failures, timeouts, first_fail_margin_s),
        _child_failed(child_failed, nodes),
    ):
        if found is not None:
            return found
    ranks = sorted({r for r in map(_rank, timeouts) if r is not None})
    seqs = sorted({s for e in timeouts if (s := _int(e.payload.get("seq_num"))) is not None})
    ops = sorted({str(e.payload.get("op_type")) for e in timeouts if e.payload.get("op_type")})
    known = f"{len(timeouts)} NCCL timeouts on {len(nodes)} hosts"
    if ranks:
        known += f" from ranks {ranks[:8]}{'...' if len(ranks) > 8 else ''}"
    if ops:
        known += f" in {', '.join(ops)}"
    if seqs:
        known += f" at SeqNum {seqs[0]}" if len(seqs) == 1 else f" at SeqNums {seqs[:4]}"
    return Culprit(
        method="unknown",
        node=None,
        confidence=0.5,
        summary=known + "; no hardware event, lagging rank or first failure shows the cause",
        facts={"ranks": ranks, "seq_nums": seqs, "op_types": ops},
    )
