"""Job log parsing: one line (`parse_job_line`) or a whole text (`parse_job_text`).

`JobLogParser` keeps the little state that multi-line output needs: ChildFailedError blocks,
NCCL's "Last error:" follow-on line, and flood collapsing (every rank prints the same error).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from collector.parse.common import (
    MAX_MESSAGE,
    MAX_RAW,
    FloodCollapser,
    cap,
    clean_line,
    fit_payload,
    join_raw,
    normalize_pci_bus_id,
)
from collector.parse.delivery import undelivered_line
from collector.parse.joblog_cuda import cuda_error, cuda_oom
from collector.parse.joblog_gpu import gpu_fault
from collector.parse.joblog_launch import failure_entry, launch
from collector.parse.joblog_more import WORTH_A_LOOK, failure_line, launcher_exit
from collector.parse.joblog_rules import JobMatch, RuleFn, nccl_error, nccl_timeout
from collector.parse.joblog_suspect import MAX_PER_WINDOW, suspect_line
from collector.parse.transcribe import transcribed
from timeline.models import Event, EventKind, Severity

RULES: list[RuleFn] = [
    nccl_timeout,
    nccl_error,
    gpu_fault,
    cuda_oom,
    cuda_error,
    launch,
    launcher_exit,
    failure_line,
]
# launcher labels: srun -l's "12: ", torchrun's "[rank3]:" / "[default3]:", and the "stdout: " /
# "stderr: " that the Hugging Face test harness puts before each line of the launcher it runs
# (accelerate/transformers testing_utils _stream_subprocess: print(label, line), label "stderr:")
_PREFIX = re.compile(
    r"^(?:\s*(?P<task>\d+): |\[(?:rank|default)(?P<rank>\d+)\]:\s?|std(?:out|err): )+"
)
_LEADING_TS = re.compile(
    r"^\[?(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
)
# "THCuda": old PyTorch's "THCudaCheck FAIL ... : out of memory" (joblog_cuda._OTHER_OOM)
_WORTH_A_LOOK = re.compile(
    r"NCCL|nccl|CUDA|cuda|THCuda|CUBLAS|CUDNN|Assertion|ChildFailedError|exitcode|oom|"
    r"Out Of Memory|CANCELLED|srun: error|Watchdog|watchdog|Heartbeat|device handle|"
    r"GpuIsLost|GPU_IS_LOST|GPU is lost|"
    r"RESET_REQUIRED|ResetRequired|low on resource"
)
# A host name as a launcher writes it; "..." or "<node>" (elided in a paste) is not one.
_HOST = re.compile(r"[A-Za-z0-9][\w.-]*")
_BLOCK_MAX_LINES = 200


def _strip_prefix(line: str) -> tuple[str, dict[str, Any]]:
    m = _PREFIX.match(line)
    if not m:
        return line, {}
    extra: dict[str, Any] = {}
    if m["rank"] is not None:
        extra["log_rank"] = int(m["rank"])
    if m["task"] is not None:
        extra["srun_task"] = int(m["task"])
    return line[m.end() :], extra


def leading_ts(line: str) -> float | None:
    """Epoch seconds of an ISO-like timestamp that opens the line (naive means UTC), or None."""
    m = _LEADING_TS.match(line)
    if not m:
        return None
    text = m["ts"].replace(",", ".").replace(" ", "T", 1).replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def classify_job_line(text: str) -> JobMatch | None:
    """Recognize one job log line (launcher prefixes already stripped); None if it is noise."""
    if not (_WORTH_A_LOOK.search(text) or WORTH_A_LOOK.search(text)):
        return None
    for rule in RULES:
        if (m := rule(text)) is not None:
            return m
    return None


def with_label(payload: dict[str, Any], label: dict[str, Any]) -> dict[str, Any]:
    """A line's payload with what its launcher label said ({"log_rank": 3}, {"srun_task": 12});
    the labelled rank is the event's rank where the line itself gives none."""
    out = {**label, **payload}
    if "rank" not in out and "log_rank" in label:
        out["rank"] = label["log_rank"]
    return out


def _event(
    m: JobMatch,
    raw: str,
    extra: dict[str, Any],
    *,
    node: str | None,
    job_id: str | None,
    ts: float | None,
    source: str,
) -> Event:
    payload = with_label(m.payload, extra)
    when = ts if ts is not None else leading_ts(raw)
    if when is None:
        when, payload["ts_unknown"] = 0.0, True
    named = m.node if m.node and _HOST.fullmatch(m.node) else None
    return Event(
        ts=when,
        node=node or named,
        source=source,
        kind=m.kind,
        pci_bus_id=normalize_pci_bus_id(m.pci_bus_id),
        job_id=job_id or m.job_id,
        code=m.code,
        severity=m.severity,
        message=cap(m.message, MAX_MESSAGE),
        raw=cap(raw.rstrip("\r\n"), MAX_RAW),
        payload=fit_payload(payload),
    )


def parse_job_line(
    line: str,
    *,
    node: str | None = None,
    job_id: str | None = None,
    ts: float | None = None,
    source: str = "joblog",
) -> Event | None:
    """One line of a job's stdout/stderr -> Event, or None when it says nothing we track."""
    line = undelivered_line(clean_line(line))
    text, extra = _strip_prefix(transcribed(line))  # the event's raw stays `line`
    m = classify_job_line(text)
    if m is None:
        return None
    return _event(m, line, extra, node=node, job_id=job_id, ts=ts, source=source)


class JobLogParser:
    """Feeds job log lines one at a time; returns Events as blocks and flood windows close."""

    def __init__(
        self,
        *,
        node: str | None = None,
        job_id: str | None = None,
        source: str = "joblog",
        flood_window_s: float = 300.0,
        max_flood_keys: int = 4096,
        emit_first: bool = False,
        suspects: bool = False,
    ) -> None:
        """`suspects`: also pass on the lines only the correlator's rules may read
        (joblog_suspect), as the agent does; `explain` reads those lines itself."""
        self.node, self.job_id, self.source = node, job_id, source
        self.suspects = suspects
        self._flood = FloodCollapser(
            window_s=flood_window_s, max_keys=max_flood_keys, emit_first=emit_first
        )
        self._block: dict[str, Any] | None = None  # an open ChildFailedError block
        # An NCCL error waits one line: NCCL may print "Last error:" and the cause under it.
        self._pending: tuple[str, Event] | None = None
        self._want_last_error = False
        self._last: tuple[str, tuple[object, ...]] | None = None  # last line -> its flood key
        # The last line that said nothing but might, were the terminal not to have wrapped it.
        self._wrap: tuple[str, str, dict[str, Any], int | None] | None = None
        # Lines only the correlator's rules may read (joblog_suspect): passed on per flood
        # window up to a bound, the rest counted (a chatty job cannot fill the store).
        self._suspect_window: tuple[float, int] = (0.0, 0)  # its start, lines passed on
        self.suspects_dropped = 0

    def feed(self, line: str, *, ts: float | None = None, offset: int | None = None) -> list[Event]:
        """Parse one line; `ts` is when it was read, `offset` where it starts in its file."""
        line = undelivered_line(clean_line(line))
        if self._last is not None and self._last[0] == line and self._block is None:
            # Every rank printing the same line: count it without parsing it again.
            counted, released = self._flood.bump(self._last[1], ts if ts is not None else 0.0)
            if counted:
                return released
        self._last = None
        wrap, self._wrap = self._wrap, None
        # the rules read the line as printed (a copied log's smart quotes, entities, markdown
        # undone); the event's raw stays `line`
        text, extra = _strip_prefix(transcribed(line))
        out: list[Event] = []
        if self._block is not None and self._block_takes(text, line):
            return out
        if self._block is not None:
            out += self._close_block()
        if self._want_last_error and text.strip() and self._pending is not None:
            self._want_last_error = False
            ev = self._pending[1]
            ev.raw = join_raw(ev.raw, line)
            ev.payload["last_error"] = text.strip()
            return out + self._release_pending()
        if text.strip() == "Last error:" and self._pending is not None:
            self._want_last_error = True
            self._pending[1].raw = join_raw(self._pending[1].raw, line)
            return out
        out += self._release_pending()
        m = classify_job_line(text)
        if m is None and wrap is not None and line[:1].isspace():
            # A terminal-wrapped line: "... Assertion `x < n`" then " failed." on the next.
            m = classify_job_line(f"{wrap[1].rstrip()} {text.strip()}")
            if m is not None:
                line, extra, offset = f"{wrap[0]}\n{line}", wrap[2], wrap[3]
        if m is None:
            if _WORTH_A_LOOK.search(text):
                self._wrap = (line, text, extra, offset)
            m = suspect_line(text) if self.suspects else None
            if m is None:
                return out
        if m.payload.get("unclassified") and self._over_bound(ts):
            return out
        ev = _event(m, line, extra, node=self.node, job_id=self.job_id, ts=ts, source=self.source)
        if offset is not None:
            ev.payload["offset"] = offset
        if m.kind is EventKind.CHILD_FAILED and m.message == "ChildFailedError":
            self._block = {"event": ev, "lines": [line], "entries": [], "section": None, "rules": 0}
            return out
        if m.kind is EventKind.NCCL_ERROR:
            self._pending = (line, ev)
            return out
        out += self._flood.add(ev)
        self._last = (line, FloodCollapser.key(ev))
        return out

    def _over_bound(self, ts: float | None) -> bool:
        """Whether one more unclassified line in this flood window is over the bound."""
        now = ts if ts is not None else 0.0
        start, count = self._suspect_window
        if now - start >= self._flood.window_s or now < start:
            start, count = now, 0
        if count >= MAX_PER_WINDOW:
            self.suspects_dropped += 1
            return True
        self._suspect_window = (start, count + 1)
        return False

    def tick(self, now: float, *, grace_s: float = 1.0) -> list[Event]:
        """Release what waited long enough by `now` (streaming use)."""
        out: list[Event] = []
        if self._pending is not None and self._pending[1].ts < now - grace_s:
            self._want_last_error = False
            out += self._release_pending()
        return out + self._flood.release_older_than(now - self._flood.window_s)

    def flush(self) -> list[Event]:
        """Release everything still held (end of text, file closed, shutdown)."""
        out = self._close_block() if self._block is not None else []
        out += self._release_pending()
        return out + self._flood.flush()

    def _release_pending(self) -> list[Event]:
        if self._pending is None:
            return []
        (line, ev), self._pending = self._pending, None
        self._want_last_error = False
        out = self._flood.add(ev)
        self._last = (line, FloodCollapser.key(ev))
        return out

    def _block_takes(self, text: str, line: str) -> bool:
        b = self._block
        assert b is not None
        s = text.strip()
        if len(b["lines"]) >= _BLOCK_MAX_LINES:
            return False
        if re.fullmatch(r"=+", s) and len(s) > 10:
            b["rules"] += 1
            b["lines"].append(line)
            return True
        if b["rules"] == 0 and s and not s.startswith(("Traceback", "File", "torch.")):
            return False
        if b["rules"] >= 2:
            return False
        b["lines"].append(line)
        if m := re.fullmatch(r"(\S+) FAILED", s):
            b["script"] = m.group(1)
        elif s.startswith("Failures:"):
            b["section"] = "failures"
        elif s.startswith("Root Cause"):
            b["section"] = "root_cause"
        elif re.fullmatch(r"\[\d+\]:", s):
            b["entries"].append((b["section"], []))
        elif b["entries"]:
            b["entries"][-1][1].append(s)
        return True

    def _close_block(self) -> list[Event]:
        b, self._block = self._block, None
        if b is None:
            return []
        ev: Event = b["event"]
        failures = [failure_entry(lines) for sec, lines in b["entries"] if sec == "failures"]
        roots = [failure_entry(lines) for sec, lines in b["entries"] if sec == "root_cause"]
        root = roots[0] if roots else (failures[0] if failures else {})
        ev.payload.update({k: v for k, v in root.items() if k != "traceback"})
        ev.payload.update(script=b.get("script"), root_cause=root or None, failures=failures)
        ev.code = root.get("exit_code")
        ev.raw = cap("\n".join(b["lines"]), MAX_RAW)
        where = f" on {root['host']}" if root.get("host") else ""
        rank = f" rank {root['rank']}" if "rank" in root else ""
        ev.message = cap(
            f"{b.get('script') or 'worker'} FAILED:{rank}{where} exitcode {root.get('exit_code')}",
            MAX_MESSAGE,
        )
        ev.severity = Severity.ERROR
        return self._flood.add(ev)


def parse_job_text(
    text: str,
    *,
    node: str | None = None,
    job_id: str | None = None,
    ts: float | None = None,
    source: str = "joblog",
    flood_window_s: float = 300.0,
    suspects: bool = False,
) -> list[Event]:
    """A whole job log -> Events in order, ChildFailedError blocks joined, floods collapsed
    (`suspects`: as JobLogParser's)."""
    parser = JobLogParser(
        node=node, job_id=job_id, source=source, flood_window_s=flood_window_s, suspects=suspects
    )
    out: list[Event] = []
    for line in text.splitlines():
        out += parser.feed(line, ts=ts)
    out += parser.flush()
    out.sort(key=lambda e: e.ts)
    return out
