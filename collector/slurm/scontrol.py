"""Pure parsers of real `scontrol show job -d`, `scontrol show node` and `squeue --json` output.

Shapes are those recorded on a real Slurm 22.05 cluster (tests/fixtures/slurm/).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from collector.slurm.hostlist import (
    HostlistError,
    expand_hostlist,
    gpu_count_from_tres,
    gpu_indices_from_gres,
    parse_tres,
)
from collector.slurm.parse import (
    TERMINAL_STATES,
    ParseError,
    PsvRow,
    SacctRecord,
    normalize_state,
    parse_exit_code,
    parse_slurm_time,
)

# --- scontrol show job -d / show node (multi-line form) ---

# Keys whose value runs to the end of the line and may hold spaces or '='.
_WHOLE_LINE_KEYS = (
    "Reason",
    "OS",
    "Command",
    "WorkDir",
    "StdOut",
    "StdErr",
    "StdIn",
    "Comment",
    "AdminComment",
    "Extra",
)


def _split_records(text: str, first_key: str) -> list[list[str]]:
    records: list[list[str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(first_key + "="):
            records.append([stripped])
        elif stripped and records:
            records[-1].append(stripped)
    return records


def _line_pairs(line: str) -> list[tuple[str, str]]:
    for key in _WHOLE_LINE_KEYS:
        if line.startswith(key + "="):
            return [(key, line[len(key) + 1 :])]
    pairs: list[tuple[str, str]] = []
    for tok in line.split():
        key, sep, value = tok.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][\w/:.]*", key):
            pairs.append((key, value))
        elif pairs:  # a value with spaces, e.g. OS=Linux 6.18 #1 SMP
            pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]} {tok}")
    return pairs


@dataclass
class ScontrolJob:
    """A job as slurmctld holds it in memory (`scontrol show job -d`)."""

    job_id: str
    state: str
    reason: str | None
    restarts: int
    start_ts: float | None
    end_ts: float | None
    nodes: list[str]
    stdout: str | None
    stderr: str | None
    gpu_idx: dict[str, list[int]] = field(default_factory=dict)  # node -> GPU indices
    fields: dict[str, str] = field(default_factory=dict)


def _scontrol_job(lines: list[str]) -> ScontrolJob:
    fields: dict[str, str] = {}
    gpu_idx: dict[str, list[int]] = {}
    for line in lines:
        pairs = _line_pairs(line)
        if pairs and pairs[0][0] == "Nodes" and any(k == "GRES" for k, _ in pairs):
            detail = dict(pairs)
            idx = gpu_indices_from_gres(detail.get("GRES"))
            for node in expand_hostlist(detail["Nodes"]):
                if idx:
                    gpu_idx[node] = idx
            continue
        for key, value in pairs:
            fields.setdefault(key, value)
    path = {k: fields.get(k) or None for k in ("StdOut", "StdErr")}
    return ScontrolJob(
        job_id=fields["JobId"],
        state=normalize_state(fields.get("JobState")),
        reason=fields.get("Reason") if fields.get("Reason") not in (None, "None") else None,
        restarts=int(fields.get("Restarts", "0") or 0),
        start_ts=parse_slurm_time(fields.get("StartTime")),
        end_ts=parse_slurm_time(fields.get("EndTime")),
        nodes=expand_hostlist(fields.get("NodeList")),
        stdout=path["StdOut"],
        stderr=path["StdErr"],
        gpu_idx=gpu_idx,
        fields=fields,
    )


def parse_scontrol_jobs(text: str) -> tuple[list[ScontrolJob], list[str]]:
    """Jobs of `scontrol show job -d` (multi-line form), plus skipped-record descriptions."""
    if text.strip() == "No jobs in the system":
        return [], []
    recs = _split_records(text, "JobId")
    if not recs and text.strip():
        raise ParseError(f"no JobId= record in scontrol output: {text[:200]!r}")
    jobs: list[ScontrolJob] = []
    bad: list[str] = []
    for lines in recs:
        try:
            jobs.append(_scontrol_job(lines))
        except (KeyError, ValueError, HostlistError) as exc:
            bad.append(f"{type(exc).__name__}: {exc}: {lines[0][:120]!r}")
    return jobs, bad


_REASON_STAMP = re.compile(r"[0-9T:-]+")


def _reason_tail(text: str) -> tuple[str, str, str] | None:
    r"""(reason, user, time) of 'reason [user@time]', or None when there is no such suffix.

    The same answer as the regex ``^(.*?)\s*\[([^@\]]+)@([0-9T:-]+)\]\s*$``, found with
    rstrip/rfind/find: that regex backtracks quadratically on a long run of blanks, tabs
    or '[' in a Reason, which is free text (``scontrol update ... Reason=``).
    """
    s = text.rstrip()
    at = s.rfind("@")
    if not s.endswith("]") or at < 2 or not _REASON_STAMP.fullmatch(s, at + 1, len(s) - 1):
        return None
    # The user part holds no '@' or ']': the bracket opens after the last one before '@',
    # and the lazy reason takes the leftmost such '['.
    floor = max(s.rfind("]", 0, at), s.rfind("@", 0, at)) + 1
    opening = s.find("[", floor, at - 1)
    if opening < 0:
        return None
    reason = s[:opening].rstrip()
    if "\n" in reason:  # the regex's '.' stops at a newline
        return None
    return reason, s[opening + 1 : at], s[at + 1 : -1]


def split_node_reason(text: str | None) -> tuple[str | None, str | None, float | None]:
    """'xid 79 [root@2026-11-22T12:15:08]' -> ('xid 79', 'root', epoch)."""
    if not text or text in ("(null)", "none", "None"):
        return None, None, None
    tail = _reason_tail(text)
    if tail is None:
        return text, None, None
    reason, user, stamp = tail
    return reason or None, user, parse_slurm_time(stamp)


@dataclass
class ScontrolNode:
    """A node as `scontrol show node` reports it."""

    name: str
    state: str  # e.g. 'IDLE', 'MIXED+DRAIN', 'DOWN+NOT_RESPONDING'
    base_state: str
    flags: list[str]
    reason: str | None
    reason_user: str | None
    reason_ts: float | None
    gpus: int | None
    gpus_alloc: int | None
    partitions: list[str]


def _scontrol_node(lines: list[str]) -> ScontrolNode:
    fields: dict[str, str] = {}
    for line in lines:
        for key, value in _line_pairs(line):
            fields.setdefault(key, value)
    raw_state = fields.get("State", "UNKNOWN").strip()
    parts = raw_state.rstrip("*").split("+")
    flags = parts[1:] + (["NOT_RESPONDING"] if raw_state.endswith("*") else [])
    reason, user, ts = split_node_reason(fields.get("Reason"))
    cfg = parse_tres(fields.get("CfgTRES"))
    alloc = parse_tres(fields.get("AllocTRES"))
    partitions = [p for p in fields.get("Partitions", "").split(",") if p]
    return ScontrolNode(
        name=fields["NodeName"],
        state=raw_state,
        base_state=parts[0],
        flags=flags,
        reason=reason,
        reason_user=user,
        reason_ts=ts,
        gpus=gpu_count_from_tres(cfg),
        gpus_alloc=gpu_count_from_tres(alloc) or 0,
        partitions=partitions,
    )


def parse_scontrol_nodes(text: str) -> tuple[list[ScontrolNode], list[str]]:
    """Nodes of `scontrol show node` (multi-line form), plus skipped-record descriptions."""
    recs = _split_records(text, "NodeName")
    if not recs and text.strip():
        raise ParseError(f"no NodeName= record in scontrol output: {text[:200]!r}")
    nodes: list[ScontrolNode] = []
    bad: list[str] = []
    for lines in recs:
        try:
            nodes.append(_scontrol_node(lines))
        except (KeyError, ValueError) as exc:
            bad.append(f"{type(exc).__name__}: {exc}: {lines[0][:120]!r}")
    return nodes, bad


def as_accounting(job: ScontrolJob) -> tuple[SacctRecord, PsvRow]:
    """A job from slurmctld's memory in the shape of an accounting record plus its exit line.

    For clusters without slurmdbd, and while it is down. scontrol's ExitCode is the true one.
    """
    f = job.fields
    tres = parse_tres(f.get("TRES"))
    terminal = job.state in TERMINAL_STATES
    rc, sig = parse_exit_code(f.get("ExitCode"))
    record = SacctRecord(
        job_id=job.job_id,
        name=f.get("JobName"),
        user=(f.get("UserId") or "").split("(")[0] or None,
        account=f.get("Account"),
        partition=f.get("Partition"),
        state=job.state,
        reason=job.reason,
        submit_ts=parse_slurm_time(f.get("SubmitTime")),
        start_ts=job.start_ts if job.state != "PENDING" else None,
        end_ts=job.end_ts if terminal else None,  # a running job's EndTime is its limit
        nodes=job.nodes,
        gpus=gpu_count_from_tres(tres),
        alloc_tres=tres,
        step_signal=None,
        step_rc=None,
        workdir=f.get("WorkDir"),
    )
    row = PsvRow(
        job.job_id, None, job.state, rc, sig, record.start_ts, record.end_ts, "", "scontrol"
    )
    return record, row


# --- squeue --json (openapi/v0.0.38) ---


def parse_squeue_gres(text: str) -> dict[str, dict[str, list[int]]]:
    """job id -> node -> GPU indices from `squeue --json` gres_detail (one entry per node)."""
    try:
        doc = json.loads(text)
        jobs = doc["jobs"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"squeue --json unreadable: {exc}") from exc
    out: dict[str, dict[str, list[int]]] = {}
    for j in jobs:
        details = j.get("gres_detail") or []
        nodes = expand_hostlist(j.get("nodes"))
        per_node: dict[str, list[int]] = {}
        for node, gres in zip(nodes, details, strict=False):
            idx = gpu_indices_from_gres(gres)
            if idx:
                per_node[node] = idx
        if per_node:
            out[str(j["job_id"])] = per_node
    return out
