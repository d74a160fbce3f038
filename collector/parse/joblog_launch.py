"""Recognizers for launcher and scheduler lines in job logs: torchrun/elastic, srun, slurmstepd."""

from __future__ import annotations

import re
from typing import Any

from collector.parse.joblog_rules import JobMatch
from timeline.models import EventKind, Severity

_CHILD_FAILED = re.compile(
    r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError"
)
_ELASTIC_FAILED = re.compile(
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lr>\d+) \(pid: (?P<pid>\d+)\) "
    r"of binary: (?P<bin>\S+)"
)
_SLURM_OOM = re.compile(
    r"Detected (?P<n>\d+) oom[-_]kill event(?:s|\(s\))? in (?:StepId=(?P<step>\w+(?:\.\w+)?)|step "
    r"(?P<step2>\w+(?:\.\w+)?) cgroup)"
)
# srun/launch.c: "%s: %s %s: ..." where the first %s is a hostlist ranged string: one host, or
# several ("gpu-[01-02]", "gpu-01,gpu-07") when tasks on several nodes ended alike
_SRUN_TASK = re.compile(
    r"srun: error: (?P<node>[\w.\[\],-]+): tasks? (?P<tasks>[\d,-]+): (?P<what>Out Of Memory|"
    r"Killed|"
    r"Exited with exit code (?P<code>\d+)|Terminated|Aborted|Segmentation fault|Bus error)"
)
_ONE_HOST = re.compile(r"[\w.-]+")
_CANCELLED = re.compile(
    r"\*\*\* (?P<what>JOB|STEP) (?P<id>[\w.+]+) ON (?P<node>\S+) CANCELLED AT (?P<at>\S+)"
    r"(?: DUE TO (?P<reason>[A-Za-z ]+?))?(?:,? SEE SLURMCTLD LOG FOR DETAILS)?\s*(?:\*\*\*)?\s*$"
)
# Older slurmstepd wording: "*** JOB 1 CANCELLED AT <time> DUE TO TIME LIMIT on <node> ***"
_CANCELLED_OLD = re.compile(
    r"\*\*\* (?P<what>JOB|STEP) (?P<id>[\w.+]+) CANCELLED AT (?P<at>\S+)"
    r"(?: DUE TO (?P<reason>[A-Za-z ]+?))? on (?P<node>\S+) \*\*\*"
)
_FAILURE_KEYS = {"time", "host", "rank", "exitcode", "error_file", "traceback"}
_FIELD = re.compile(r"^\s*(?P<k>[a-z_]+)\s*: ?(?P<v>.*)$")
_SIGNAL = re.compile(r"Signal (?P<num>\d+) \((?P<name>SIG\w+)\)")


def launch(line: str) -> JobMatch | None:
    """ChildFailedError headers, elastic `failed (exitcode: ...)`, srun/slurmstepd outcomes."""
    if _CHILD_FAILED.search(line):
        return JobMatch(EventKind.CHILD_FAILED, "ChildFailedError", None, Severity.ERROR, {})
    if m := _ELASTIC_FAILED.search(line):
        code = int(m["code"])
        p: dict[str, Any] = {
            "exit_code": code,
            "local_rank": int(m["lr"]),
            "pid": int(m["pid"]),
            "binary": m["bin"],
        }
        if code < 0:
            p["signal"] = -code
        msg = f"elastic worker local_rank {p['local_rank']} failed (exitcode {code})"
        return JobMatch(EventKind.CHILD_FAILED, msg, code, Severity.ERROR, p)
    if m := _SLURM_OOM.search(line):
        step = m["step"] or m["step2"]
        p = {"oom_kill_events": int(m["n"]), "step_id": step, "stage": "slurmstepd"}
        return JobMatch(
            EventKind.HOST_OOM,
            f"{m['n']} oom-kill event(s) in step {step}",
            None,
            Severity.ERROR,
            p,
            job_id=step.split(".")[0],
        )
    if m := _SRUN_TASK.search(line):
        what = m["what"]
        p = {"tasks": m["tasks"], "outcome": what}
        node = m["node"] if _ONE_HOST.fullmatch(m["node"]) else None  # a range names no one
        if what == "Out Of Memory":
            return JobMatch(
                EventKind.HOST_OOM,
                f"srun: task {m['tasks']} Out Of Memory",
                None,
                Severity.ERROR,
                p,
                node=node,
            )
        exit_code = int(m["code"]) if m["code"] else None
        return JobMatch(
            EventKind.JOB_STATE,
            f"srun: task {m['tasks']}: {what}",
            exit_code,
            Severity.ERROR,
            p,
            node=node,
        )
    if m := (_CANCELLED.search(line) or _CANCELLED_OLD.search(line)):
        job = m["id"].split(".")[0]
        p = {"state": "CANCELLED", "scope": m["what"].lower(), "at": m["at"], "id": m["id"]}
        if m["reason"]:
            p["reason"] = m["reason"].strip()
        msg = f"{m['what']} {m['id']} CANCELLED" + (
            f" due to {p['reason']}" if "reason" in p else ""
        )
        sev = Severity.ERROR if "reason" in p else Severity.WARNING
        return JobMatch(EventKind.JOB_STATE, msg, None, sev, p, job_id=job, node=m["node"])
    return None


def failure_entry(lines: list[str]) -> dict[str, Any]:
    """One `[N]:` entry of a ChildFailedError block -> rank, host, exit code, signal, pid."""
    raw: dict[str, str] = {}
    for ln in lines:
        if (m := _FIELD.match(ln)) and m["k"] in _FAILURE_KEYS:
            raw[m["k"]] = m["v"].strip()
    out: dict[str, Any] = {k: v for k, v in raw.items() if k in ("time", "host", "error_file")}
    if r := re.match(r"(-?\d+)(?: \(local_rank: (\d+)\))?", raw.get("rank", "")):
        out["rank"] = int(r.group(1))
        if r.group(2):
            out["local_rank"] = int(r.group(2))
    if e := re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", raw.get("exitcode", "")):
        out["exit_code"] = int(e.group(1))
        if e.group(2):
            out["pid"] = int(e.group(2))
        if out["exit_code"] < 0:
            out["signal"] = -out["exit_code"]
    tb = raw.get("traceback", "")
    if tb:
        out["traceback"] = tb
    if s := _SIGNAL.search(tb):
        out["signal"], out["signal_name"] = int(s["num"]), s["name"]
    return out
