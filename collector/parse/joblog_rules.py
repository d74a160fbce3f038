"""Recognizers for job stdout/stderr lines: NCCL, CUDA, PyTorch elastic, Slurm step messages.

Each takes a line with launcher prefixes already stripped and returns a `JobMatch` or None.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from timeline.models import EventKind, Severity


@dataclass
class JobMatch:
    """What a recognizer read from one job log line."""

    kind: EventKind
    message: str
    code: int | None = None
    severity: Severity = Severity.ERROR
    payload: dict[str, Any] = field(default_factory=dict)
    job_id: str | None = None
    node: str | None = None
    pci_bus_id: str | None = None  # as the line writes it; normalized when the Event is made


# --- NCCL watchdog --------------------------------------------------------------------------

_WATCHDOG = re.compile(
    # from the first 'Watchdog ... WorkNCCL(' of a line only: a later one reaches less, so it
    # matches only when the first does (retrying each of a line repeating it was quadratic)
    r"(?<![^\n])(?>[^\n]*?Watchdog caught collective operation timeout: WorkNCCL\()"
    r"(?P<args>.*?)\) ran for "
    r"(?P<ran>\d+) milliseconds before timing out"
)
_RANK = re.compile(r"\[(?:PG ID (?P<pg>\S+) PG GUID (?P<guid>\S+) )?Rank (?P<rank>\d+)\]")
# (a key from the start of its word: see _NCCL_WARN)
_KV = re.compile(r"(?<!\w)(?P<k>\w+(?:\(ms\))?)=(?P<v>[^,]+)")
_WORK_KEYS = {
    "SeqNum": "seq_num",
    "OpType": "op_type",
    "NumelIn": "numel_in",
    "NumelOut": "numel_out",
    "Timeout(ms)": "timeout_ms",
}
_LAST_WORK = re.compile(
    r"(?:Timeout at NCCL work|detected by watchdog at work): (?P<at>-?\d+), "
    r"last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+)"
)
_STUCK = re.compile(r"watchdog got stuck for (?P<secs>\d+) seconds|Heartbeat monitor timed out")


def _rank_fields(line: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if r := _RANK.search(line):
        out["rank"] = int(r["rank"])
        if r["pg"] is not None:
            out["pg_id"] = r["pg"]
    return out


def nccl_timeout(line: str) -> JobMatch | None:
    """PyTorch ProcessGroupNCCL watchdog timeouts and its last enqueued/completed work lines."""
    if m := _WATCHDOG.search(line):
        p: dict[str, Any] = _rank_fields(line)
        for kv in _KV.finditer(m["args"]):
            key = _WORK_KEYS.get(kv["k"], kv["k"].lower())
            v = kv["v"].strip()
            p[key] = int(v) if v.lstrip("-").isdigit() else v
        p["ran_for_ms"] = int(m["ran"])
        who = f"rank {p['rank']} " if "rank" in p else ""
        msg = (
            f"NCCL watchdog timeout: {who}{p.get('op_type', '?')} SeqNum={p.get('seq_num', '?')} "
            f"ran {p['ran_for_ms']} ms (timeout {p.get('timeout_ms', '?')} ms)"
        )
        return JobMatch(EventKind.NCCL_TIMEOUT, msg, None, Severity.ERROR, p)
    if m := _LAST_WORK.search(line):
        p = _rank_fields(line)
        p.update(seq_num=int(m["at"]), last_enqueued=int(m["enq"]), last_completed=int(m["done"]))
        msg = (
            f"NCCL work {p['seq_num']} timed out: last enqueued {p['last_enqueued']}, "
            f"last completed {p['last_completed']}"
        )
        return JobMatch(EventKind.NCCL_TIMEOUT, msg, None, Severity.ERROR, p)
    if m := _STUCK.search(line):
        p = _rank_fields(line)
        p["stage"] = "watchdog_stuck" if m["secs"] else "heartbeat_timeout"
        if m["secs"]:
            p["stuck_s"] = int(m["secs"])
        return JobMatch(EventKind.NCCL_TIMEOUT, line.strip(), None, Severity.ERROR, p)
    return None


# --- NCCL WARN and NCCL errors ----------------------------------------------------------------

# host:pid:tid [dev] is NCCL's own prefix; a line quoted without it still says what happened.
# A name is read from the start of its run only (the lookbehind): the leftmost match starts
# there anyway, and retrying it from every position of a long run is quadratic on hostile lines.
_NCCL_WARN = re.compile(
    r"(?:(?<![\w.-])(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<src>\S+:\d+) )?)?NCCL WARN (?P<text>.*)$"
)
# ibv_get_async_event: "NET/IB : Got async event : port error" (NCCL <= 2.18) or, newer,
# "NET/IB : mlx5_0:1 Got async event : port error".
_IB_ASYNC = re.compile(
    r"NET/IB\w*\s*:\s*(?:(?P<hca>[\w.-]+):(?P<port>\d+)\s+)?Got async event\s*:\s*(?P<ev>.+?)\s*$"
)
_IB_COMPLETION = re.compile(
    r"Got completion from peer (?P<peer>[^\s<]+)(?:<(?P<port>\d+)>)? with (?:error |status=)"
    r"(?P<status>\d+),? opcode[ =](?P<opcode>\d+),? len[ =](?P<len>\d+),? vendor err (?P<verr>\d+)"
)
_PEER = re.compile(r"(?:to|from|peer) (?P<peer>[^\s<]+)<(?P<port>\d+)>")
_NCCL_RESULT = {
    "ncclUnhandledCudaError": 1,
    "ncclSystemError": 2,
    "ncclInternalError": 3,
    "ncclInvalidArgument": 4,
    "ncclInvalidUsage": 5,
    "ncclRemoteError": 6,
}
_NCCL_RESULT_LINE = re.compile(r"\b(?P<name>" + "|".join(_NCCL_RESULT) + r"): (?P<text>.*)$")
_NCCL_ERROR_IN = re.compile(
    r"(?:(?<![\w.])(?P<exc>[\w.]+): )?NCCL error(?: in: (?P<where>\S+?),|:)\s*(?P<what>[^,(]+)"
    r"(?:\(run with NCCL_DEBUG=INFO for details\))?(?:, NCCL version (?P<ver>[\w.]+))?"
)
_NCCL_WHAT = {
    "unhandled cuda error": 1,
    "unhandled system error": 2,
    "internal error": 3,
    "invalid argument": 4,
    "invalid usage": 5,
    "remote process exited or there was a network error": 6,
}


def _nccl_warn(m: re.Match[str]) -> JobMatch:
    """An NCCL WARN line: its text, the printer's prefix, and the transport's own fields."""
    text = m["text"].strip()
    p: dict[str, Any] = {"text": text}
    if m["host"]:
        p.update(host=m["host"], pid=int(m["pid"]), tid=int(m["tid"]), cuda_dev=int(m["dev"]))
    if m["src"]:
        p["src"] = m["src"]
    code = None
    if ev := _IB_ASYNC.search(text):
        p.update(transport="NET/IB", ib_async_event=ev["ev"])
        if ev["hca"]:
            p.update(hca=ev["hca"], ib_port=int(ev["port"]))
    elif ib := _IB_COMPLETION.search(text):
        code = int(ib["status"])
        p.update(
            transport="NET/IB",
            peer=ib["peer"],
            ib_status=code,
            opcode=int(ib["opcode"]),
            length=int(ib["len"]),
            vendor_err=int(ib["verr"]),
        )
        if port := ib["port"]:
            p["peer_port"] = int(port)
        if hca := re.search(r"\bhca (\S+)", text):
            p["hca"] = hca.group(1)
    elif t := re.match(r"(NET/\w+|Net|socket\w*|Call to \w+)", text):
        p["transport"] = t.group(1)
        if peer := _PEER.search(text):
            p["peer"], p["peer_port"] = peer["peer"], int(peer["port"])
        if why := re.search(r"failed(?:\s*:| with error)\s*(.+)$", text):
            p["socket_error"] = why.group(1).strip()
    if re.search(r"remote (?:peer|process)", text, re.I):
        p["remote"] = True
    return JobMatch(EventKind.NCCL_ERROR, f"NCCL WARN {text}", code, Severity.WARNING, p)


def nccl_error(line: str) -> JobMatch | None:
    """NCCL WARN lines (NET/IB completions, sockets, remote peers) and NCCL error exceptions."""
    if m := _NCCL_WARN.search(line):
        return _nccl_warn(m)
    if m := _NCCL_ERROR_IN.search(line):
        what = m["what"].strip()
        p = {"error": what}
        if m["where"]:
            p["where"] = m["where"]
        if m["exc"]:
            p["exception"] = m["exc"]
        if m["ver"]:
            p["nccl_version"] = m["ver"]
        if inline := re.search(r"Last error:\s*(.+)$", line):  # a log flattened onto one line
            p["last_error"] = inline.group(1).strip()
        return JobMatch(
            EventKind.NCCL_ERROR, f"NCCL error: {what}", _NCCL_WHAT.get(what), Severity.ERROR, p
        )
    if m := _NCCL_RESULT_LINE.search(line):
        p = {"error": m["name"], "text": m["text"].strip()}
        if inline := re.search(r"Last error:\s*(.+)$", m["text"]):
            p["last_error"] = inline.group(1).strip()
        return JobMatch(
            EventKind.NCCL_ERROR,
            f"{m['name']}: {p['text']}",
            _NCCL_RESULT[m["name"]],
            Severity.ERROR,
            p,
        )
    return None


RuleFn = Callable[[str], JobMatch | None]
