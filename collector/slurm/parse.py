"""Pure parsers of real Slurm 22.05 `sacct --json` and `sacct -P` output, and shared helpers.

Shapes are those recorded on a real cluster (tests/fixtures/slurm/). Every parser raises
ParseError for a whole document it cannot read, and skips (and reports) single bad records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from collector.health import SourceHealth
from collector.slurm.hostlist import (
    HostlistError,
    expand_hostlist,
    gpu_count_from_tres,
)
from timeline.bounds import clean_name

TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REQUEUED",
        "REVOKED",
        "TIMEOUT",
    }
)


class ParseError(ValueError):
    """A whole document (not one record) could not be parsed."""


T = TypeVar("T")


def parse_counted(
    text: str,
    parse: Callable[[str], tuple[list[T], list[str]]],
    health: SourceHealth,
    *,
    whole: str,
    record: str,
) -> list[T] | None:
    """Parse one command's output; count a failure of the whole (None) or of single records."""
    try:
        items, bad = parse(text)
    except ParseError as exc:
        health.parse_failure(whole, str(exc))
        return None
    for b in bad:
        health.parse_failure(record, b)
    return items


def parse_slurm_time(text: str | None) -> float | None:
    """Slurm's local 'YYYY-MM-DDTHH:MM:SS' to epoch seconds; None for Unknown/None/N/A."""
    if not text or text in ("Unknown", "None", "N/A", "(null)"):
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def normalize_state(text: str | None) -> str:
    """'CANCELLED by 0' -> 'CANCELLED'; 'COMPLETED' stays; empty -> 'UNKNOWN'."""
    if not text:
        return "UNKNOWN"
    return text.split()[0].upper()


def parse_exit_code(text: str | None) -> tuple[int | None, int | None]:
    """sacct's 'rc:signal' ('1:0', '0:15') -> (rc, signal)."""
    if not text:
        return None, None
    rc, _, sig = text.partition(":")
    try:
        return int(rc), int(sig or 0)
    except ValueError:
        return None, None


# --- sacct --json (openapi/dbv0.0.38) ---


@dataclass
class SacctRecord:
    """One accounting record of a job (a requeued job has one per run)."""

    job_id: str
    name: str | None
    user: str | None
    account: str | None
    partition: str | None
    state: str
    reason: str | None
    submit_ts: float | None
    start_ts: float | None
    end_ts: float | None
    nodes: list[str]
    gpus: int | None
    alloc_tres: dict[str, str]
    step_signal: int | None  # the first signal a step died of (job-level JSON never has it)
    step_rc: int | None  # a non-zero step return code, when the JSON has one
    array_job_id: str | None = None
    array_task_id: str | None = None
    workdir: str | None = None


def _epoch(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _tres_list(items: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for t in items or []:
        if not isinstance(t, dict) or t.get("count") is None:
            continue
        key = t.get("type", "")
        if t.get("name"):
            key = f"{key}/{t['name']}"
        out[str(key)] = str(t["count"])
    return out


def _step_exit(steps: Any) -> tuple[int | None, int | None]:
    signal: int | None = None
    rc: int | None = None
    for s in steps or []:
        ec = s.get("exit_code") or {}
        sig = (ec.get("signal") or {}).get("signal_id")
        if signal is None and isinstance(sig, int) and sig > 0:
            signal = sig
        code = ec.get("return_code")
        if rc is None and isinstance(code, int) and code != 0:
            rc = code
    return rc, signal


def _sacct_record(j: dict[str, Any]) -> SacctRecord:
    tm = j.get("time") or {}
    st = j.get("state") or {}
    tres = _tres_list((j.get("tres") or {}).get("allocated"))
    rc, sig = _step_exit(j.get("steps"))
    array = j.get("array") or {}
    return SacctRecord(
        job_id=str(j["job_id"]),
        # Names a user chose: cleaned, so a control character cannot hide the job.
        name=clean_name(j.get("name"), 255),
        user=clean_name(j.get("user"), 128),
        account=clean_name(j.get("account"), 128),
        partition=j.get("partition"),
        state=normalize_state(st.get("current")),
        reason=st.get("reason") if st.get("reason") not in (None, "None") else None,
        submit_ts=_epoch(tm.get("submission")),
        start_ts=_epoch(tm.get("start")),
        end_ts=_epoch(tm.get("end")),
        nodes=expand_hostlist(j.get("nodes")),
        gpus=gpu_count_from_tres(tres),
        alloc_tres=tres,
        step_signal=sig,
        step_rc=rc,
        array_job_id=str(array["job_id"]) if array.get("job_id") else None,
        array_task_id=str(array["task_id"]) if array.get("task_id") is not None else None,
        workdir=j.get("working_directory"),
    )


def parse_sacct_json(text: str) -> tuple[list[SacctRecord], list[str]]:
    """All job records of `sacct --json`, plus a description of each record that was skipped."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"sacct --json is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ParseError("sacct --json has no 'jobs' list")
    records: list[SacctRecord] = []
    bad: list[str] = []
    for j in doc["jobs"]:
        try:
            records.append(_sacct_record(j))
        except (KeyError, TypeError, AttributeError, ValueError, HostlistError) as exc:
            bad.append(f"{type(exc).__name__}: {exc}")
    return records, bad


# --- sacct -P ---

SACCT_PSV_FIELDS = "JobIDRaw,JobID,State,ExitCode,DerivedExitCode,NodeList,Submit,Start,End,Reason"


@dataclass
class PsvRow:
    """One line of `sacct -P`: a job record or one of its steps."""

    job_id: str  # JobIDRaw without the step suffix
    step: str | None  # 'batch', 'extern', '0', ... or None for the job line
    state: str
    exit_code: int | None
    signal: int | None
    start_ts: float | None
    end_ts: float | None
    raw: str
    origin: str = "sacct -P"  # or "scontrol" when slurmctld's memory stood in for accounting


def parse_sacct_psv(text: str) -> tuple[list[PsvRow], list[str]]:
    """Rows of `sacct -P` with a header line; bad lines are returned as skipped descriptions."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return [], []
    header = lines[0].split("|")
    id_col = "JobIDRaw" if "JobIDRaw" in header else "JobID"
    if id_col not in header or "State" not in header or "ExitCode" not in header:
        raise ParseError(f"sacct -P header lacks JobID/State/ExitCode: {lines[0][:200]!r}")
    rows: list[PsvRow] = []
    bad: list[str] = []
    for line in lines[1:]:
        cells = line.split("|")
        if len(cells) != len(header):
            bad.append(f"{len(cells)} cells for {len(header)} columns: {line[:200]!r}")
            continue
        rec = dict(zip(header, cells, strict=True))
        job_id, _, step = rec[id_col].partition(".")
        rc, sig = parse_exit_code(rec["ExitCode"])
        rows.append(
            PsvRow(
                job_id=job_id,
                step=step or None,
                state=normalize_state(rec["State"]),
                exit_code=rc,
                signal=sig,
                start_ts=parse_slurm_time(rec.get("Start")),
                end_ts=parse_slurm_time(rec.get("End")),
                raw=line,
            )
        )
    return rows, bad
