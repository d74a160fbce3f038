"""Job log source: follows running jobs' stdout/stderr and emits NCCL/CUDA/OOM/launcher events.

Which files to follow comes from an injected callable (for Slurm, the StdOut/StdErr paths that
`scontrol show job` reports for jobs running on this node). Each followed file is a
`LineStream` (collector.parse.follow): a file followed by offset now; a Kubernetes pod log
stream can implement the same two methods later. Memory stays bounded on huge logs: reads are
capped per pass (FileFollower.max_bytes), lines are cut at MAX_LINE, and flood windows hold one
event per distinct line.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from collector.base import Emit, Observations, poll_until_stopped
from collector.health import SourceHealth
from collector.parse.follow import FileFollower, LineStream
from collector.parse.joblog import JobLogParser
from collector.slurm.runner import CommandRunner
from collector.slurm.scontrol import parse_scontrol_jobs
from timeline.models import Event


@dataclass(frozen=True)
class JobLogTarget:
    """One log of one job to follow: a Slurm StdOut/StdErr path (or another stream's key)."""

    job_id: str
    path: str
    stream: str = "stdout"  # stdout | stderr | pod container name


@dataclass
class _Followed:
    target: JobLogTarget
    stream: LineStream
    parser: JobLogParser
    lines: int = 0
    events: int = 0
    extra: dict[str, int] = field(default_factory=dict)


def file_stream(target: JobLogTarget, health: SourceHealth) -> LineStream:
    """The default stream: follow the target's path as a file."""
    return FileFollower(target.path, health=health)


class JobLogSource:
    """Follows the logs `targets()` names; polled `collect()` or streaming `run()`."""

    name = "joblog"

    def __init__(
        self,
        *,
        node: str,
        targets: Callable[[], Iterable[JobLogTarget]],
        open_stream: Callable[[JobLogTarget, SourceHealth], LineStream] = file_stream,
        clock: Callable[[], float] = time.time,
        flood_window_s: float = 10.0,  # identical lines within it become one event (its latency)
        poll_s: float = 2.0,
        health: SourceHealth | None = None,
    ) -> None:
        self.node, self.targets, self.open_stream, self.clock = node, targets, open_stream, clock
        self.flood_window_s = flood_window_s
        self.poll_s = poll_s
        self.health = health or SourceHealth("joblog")
        self._followed: dict[tuple[str, str], _Followed] = {}

    def collect(self) -> Observations:
        """Read new lines of every current target; stop following targets that went away."""
        try:
            wanted = {(t.job_id, t.path): t for t in self.targets()}
        except Exception as exc:  # the target lister is another system (scontrol, K8s)
            self.health.error("targets_failed", exc)
            wanted = {k: f.target for k, f in self._followed.items()}
        events: list[Event] = []
        for key in [k for k in self._followed if k not in wanted]:
            events += self._finish(self._followed.pop(key))
        now = self.clock()
        for key, target in wanted.items():
            fol = self._followed.get(key)
            if fol is None:
                fol = self._start(target)
                self._followed[key] = fol
            events += self._read(fol, now)
            events += [self._keyed(fol, e) for e in fol.parser.tick(now)]
        return Observations(events=events)

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Follow until `stop` is set; then release what is held and emit it."""
        poll_until_stopped(stop, collect=self.collect, emit=emit, interval_s=self.poll_s)
        final = self.close()
        if final:
            emit(Observations(events=final))

    def close(self) -> list[Event]:
        """Stop following everything; return the events still held."""
        events: list[Event] = []
        for key in list(self._followed):
            events += self._finish(self._followed.pop(key))
        return events

    def following(self) -> list[JobLogTarget]:
        """The targets followed right now."""
        return [f.target for f in self._followed.values()]

    # --- internals --------------------------------------------------------------------------

    def _start(self, target: JobLogTarget) -> _Followed:
        parser = JobLogParser(
            node=self.node,
            job_id=target.job_id,
            flood_window_s=self.flood_window_s,
            emit_first=True,  # the first of a flood goes out at once, its repeats counted later
            suspects=True,  # failure-worded lines no recognizer reads go to the correlator's rules
        )
        return _Followed(target, self.open_stream(target, self.health), parser)

    def _read(self, fol: _Followed, now: float) -> list[Event]:
        events: list[Event] = []
        try:
            lines = fol.stream.read_lines()
        except Exception as exc:  # a stream is I/O against something else; never crash
            self.health.error("stream_failed", exc)
            return events
        dropped = fol.parser.suspects_dropped
        for offset, line in lines:
            fol.lines += 1
            events += [self._keyed(fol, ev) for ev in fol.parser.feed(line, ts=now, offset=offset)]
        if over := fol.parser.suspects_dropped - dropped:
            # failure-worded lines past the per-window bound: nobody reads them (counted)
            self.health.parse_failure("unclassified_over_bound", fol.target.path, count=over)
        return events

    def _finish(self, fol: _Followed) -> list[Event]:
        events = [self._keyed(fol, e) for e in fol.parser.flush()]
        fol.stream.close()
        return events

    def _keyed(self, fol: _Followed, ev: Event) -> Event:
        if ev.dedup_key is None:
            where = ev.payload.get("offset")
            ref = where if isinstance(where, int) else f"{ev.ts:.3f}"
            if ev.payload.get("repeat"):
                ref = f"{ref}:repeats"
            digest = hashlib.sha1(fol.target.path.encode(), usedforsecurity=False).hexdigest()[:12]
            ev.dedup_key = f"{fol.target.job_id}:{digest}:{ref}"
        ev.payload.setdefault("log_path", fol.target.path)
        ev.payload.setdefault("log_stream", fol.target.stream)
        return ev


class SlurmJobLogs:
    """Targets for JobLogSource: StdOut/StdErr of the running jobs whose batch host is this node.

    Slurm writes a batch job's output (every task's, through srun) on its batch host, so only
    that node follows it. `scontrol show job -d` runs through the injected command runner.
    """

    def __init__(
        self,
        *,
        node: str,
        runner: CommandRunner,
        timeout_s: float = 15.0,
        health: SourceHealth | None = None,
    ) -> None:
        self.node, self.runner, self.timeout_s = node, runner, timeout_s
        self.health = health or SourceHealth("joblog-slurm")

    def __call__(self) -> list[JobLogTarget]:
        """The logs to follow now; raises when scontrol fails so the source keeps its list."""
        result = self.runner(["scontrol", "show", "job", "-d"], self.timeout_s)
        if not result.ok:
            raise RuntimeError(f"scontrol show job failed: {result.error} {result.stderr[:200]}")
        jobs, bad = parse_scontrol_jobs(result.stdout)
        for b in bad:
            self.health.parse_failure("scontrol_job_record", b)
        targets: list[JobLogTarget] = []
        for job in jobs:
            batch_host = job.fields.get("BatchHost") or (job.nodes[0] if job.nodes else None)
            if job.state != "RUNNING" or batch_host != self.node:
                continue
            for stream, path in (("stdout", job.stdout), ("stderr", job.stderr)):
                if path and all(t.path != path or t.job_id != job.job_id for t in targets):
                    targets.append(JobLogTarget(job_id=job.job_id, path=path, stream=stream))
        return targets
