"""Reader for `scontrol show job`: its JobState= becomes the same JOB_STATE event as sacct's.

scontrol prints a job as "Key=Value" fields (SchedMD/slurm src/api/job_info.c, cited in
correlator/rules/emitters/slurm.json): "JobId=%u JobName=%s", "UserId=%s(%u)", "JobState=%s
Reason=%s Dependency=%s", "ExitCode=%u:%u", "NodeList=%s", one block per job (blank line
between), or all on one line with -o. The state word is job_state_string's (src/common/
slurm_protocol_defs.c @d43feafc018f6e7cea939f747f987d5579a3887c: PENDING, RUNNING, SUSPENDED,
COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE,
OUT_OF_MEMORY, or a flag state such as COMPLETING, REQUEUED, REQUEUE_HOLD, SPECIAL_EXIT), the
word sacct prints too, so the sacct state rules judge it unchanged.
"""

from __future__ import annotations

import re

from correlator.explain.readers_gpu import ReadResult
from correlator.explain.readers_sched import QUIET_STATES, job_state_event, single_host
from correlator.rules import first_rule

_STATE = re.compile(r"(?:^|\s)JobState=(?P<state>[A-Z][A-Z_]+)\b")
_FIELD = re.compile(r"(?:^|\s)(?P<key>JobId|Reason|ExitCode|NodeList|UserId)=(?P<value>\S+)")
_BLOCK_REACH = 40  # lines a job's block spans at most either side of its JobState= line
_KEYS = {
    "JobId": "jobid",
    "Reason": "reason",
    "ExitCode": "exitcode",
    "UserId": "user",
    "NodeList": "nodelist",
}


def _block(lines: list[str], i: int) -> list[str]:
    """The lines of the job block around line i: up to the blank lines that bound it."""
    start = i
    while start > 0 and i - start < _BLOCK_REACH and lines[start - 1].strip():
        start -= 1
    end = i
    while end + 1 < len(lines) and end - i < _BLOCK_REACH and lines[end + 1].strip():
        end += 1
    # the state line's own fields first: with -o every job is one line of its own
    return [lines[i], *lines[start:i], *lines[i + 1 : end + 1]]


def _fields(block: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for n, line in enumerate(block):
        if n and _STATE.search(line):
            continue  # another job's one-line record
        for m in _FIELD.finditer(line):
            found.setdefault(m["key"], m["value"])
    out = {_KEYS[k]: v for k, v in found.items() if k in _KEYS}
    out["user"] = out.get("user", "").split("(")[0]  # "alice(1000)"
    return out


def read_scontrol_job(lines: list[str]) -> ReadResult:
    """`scontrol show job` (block or -o form): a JOB_STATE event for each job whose state
    line no rule reads and whose state is not a quiet one."""
    out = ReadResult()
    for i, line in enumerate(lines):
        m = _STATE.search(line) if "JobState=" in line else None
        if m is None:
            continue
        # A state that is fine, or a line a rule already reads (its Reason= is more specific
        # than the state: JobState=FAILED Reason=SystemFailure), is left to the rules as is
        if m["state"] in QUIET_STATES or first_rule(line) is not None:
            continue
        out.claimed.add(i)
        fields = _fields(_block(lines, i))
        node = single_host(fields.get("nodelist"))
        out.events.append(job_state_event(line, m["state"], fields, node=node, scope="scontrol"))
    return out
