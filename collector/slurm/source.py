"""The Slurm cluster source: jobs from sacct, GPU indices from scontrol, nodes from scontrol.

Scheduled in the server. Each collect() reads:
  scontrol show job -d   jobs in slurmctld's memory: GPU IDX per node (only while running),
                         StdOut/StdErr paths, Restarts
  sacct --json           accounting records in a time window (incl. one record per requeued run)
  sacct -P -D            the same window's exit codes (22.05's JSON job exit_code is always 0)
  scontrol show node     node state, reason, who set it and when
A failed or garbled command is counted in `health` and that part is skipped for this poll;
without sacct (no slurmdbd, or it is down) jobs come from what slurmctld still holds.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.base import Observations
from collector.health import SourceHealth
from collector.slurm.nodes import NodeTracker
from collector.slurm.parse import (
    SACCT_PSV_FIELDS,
    TERMINAL_STATES,
    PsvRow,
    SacctRecord,
    parse_counted,
    parse_sacct_json,
    parse_sacct_psv,
)
from collector.slurm.runner import CommandResult, CommandRunner
from collector.slurm.scontrol import ScontrolJob, as_accounting, parse_scontrol_jobs
from timeline.models import Allocation, Event, EventKind, Job, Scheduler, Severity

_SEVERITY = {
    "FAILED": Severity.ERROR,
    "NODE_FAIL": Severity.ERROR,
    "OUT_OF_MEMORY": Severity.ERROR,
    "BOOT_FAIL": Severity.ERROR,
    "TIMEOUT": Severity.WARNING,
    "PREEMPTED": Severity.WARNING,
    "REQUEUED": Severity.WARNING,
    "DEADLINE": Severity.WARNING,
}
_HOLDING = frozenset({"RUNNING", "SUSPENDED"})


def _requeues_seen(recs: list[SacctRecord]) -> int:
    """Requeues visible in one job's records: every earlier run, and a last one that says so."""
    return len(recs) - 1 + (1 if recs[-1].state == "REQUEUED" else 0)


@dataclass
class _Open:
    """GPU allocations of one running job, kept until the job stops running."""

    start_ts: float
    allocations: list[Allocation] = field(default_factory=list)


class SlurmSource:
    """Polled source for one Slurm cluster, reading it through an injected command runner."""

    name = "slurm"

    def __init__(
        self,
        runner: CommandRunner,
        clock: Callable[[], float] = time.time,
        *,
        cluster: str = "default",
        lookback_s: float = 3600.0,
        overlap_s: float = 300.0,
        command_timeout_s: float = 20.0,
        health: SourceHealth | None = None,
        max_tracked: int = 50_000,
    ) -> None:
        self._run = runner
        self._clock = clock
        self.cluster = cluster
        self.lookback_s = lookback_s
        self.overlap_s = overlap_s
        self.command_timeout_s = command_timeout_s
        self.health = health or SourceHealth(self.name)
        self._max = max_tracked
        self._hwm: float | None = None  # end of the last sacct window read successfully
        self._emitted: OrderedDict[str, None] = OrderedDict()  # event keys sent this process
        self._job_fp: OrderedDict[str, str] = OrderedDict()  # job_id -> last Job sent
        self._paths: OrderedDict[str, tuple[str | None, str | None]] = OrderedDict()
        self._restarts: OrderedDict[str, int] = OrderedDict()  # job_id -> scontrol Restarts
        self._open: dict[str, _Open] = {}
        self._nodes = NodeTracker(cluster=cluster, health=self.health)

    # --- commands ---

    def _command(self, argv: list[str], what: str) -> str | None:
        result: CommandResult = self._run(argv, self.command_timeout_s)
        if not result.ok:
            self.health.error(f"{what}: {result.error}", RuntimeError(result.stderr.strip()[:300]))
            return None
        return result.stdout

    def _scontrol_jobs(self) -> dict[str, ScontrolJob] | None:
        text = self._command(["scontrol", "show", "job", "-d"], "scontrol show job")
        if text is None:
            return None
        jobs = parse_counted(
            text, parse_scontrol_jobs, self.health, whole="scontrol_show_job",
            record="scontrol_job_record",
        )  # fmt: skip
        return None if jobs is None else {j.job_id: j for j in jobs}

    def _sacct(self, now: float) -> tuple[list[SacctRecord], list[PsvRow]] | None:
        since = now - self.lookback_s if self._hwm is None else self._hwm - self.overlap_s
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
        window = ["-a", "-S", start, "-E", "now"]
        text = self._command(["sacct", "--json", *window], "sacct --json")
        if text is None:
            return None
        records = parse_counted(
            text, parse_sacct_json, self.health, whole="sacct_json", record="sacct_json_record"
        )
        if records is None:
            return None
        rows: list[PsvRow] = []
        psv = self._command(
            ["sacct", "-P", "-D", *window, f"--format={SACCT_PSV_FIELDS}"], "sacct -P"
        )
        if psv is not None:
            rows = (
                parse_counted(
                    psv, parse_sacct_psv, self.health, whole="sacct_psv", record="sacct_psv_line"
                )
                or []
            )
        return records, rows

    # --- collect ---

    def collect(self) -> Observations:
        """Poll the cluster once; never raises for what the commands return."""
        now = self._clock()
        obs = Observations()
        ctl = self._scontrol_jobs()
        for job in (ctl or {}).values():
            self._remember(self._paths, job.job_id, (job.stdout, job.stderr))
            known = self._restarts.get(job.job_id, 0)
            self._remember(self._restarts, job.job_id, max(known, job.restarts))
        by_job: dict[str, list[SacctRecord]] = {}
        sacct = self._sacct(now)
        if sacct is not None:
            records, rows = sacct
            self._hwm = now
        elif ctl is not None:  # no accounting (or slurmdbd down): what slurmctld still holds
            pairs = [as_accounting(j) for j in ctl.values()]
            records, rows = [r for r, _ in pairs], [row for _, row in pairs]
        else:
            records, rows = [], []
        for rec in records:
            by_job.setdefault(rec.job_id, []).append(rec)
        self._jobs(by_job, rows, now, obs)
        if ctl is not None:
            self._allocations(ctl, by_job, now, obs)
        node_text = self._command(["scontrol", "show", "node"], "scontrol show node")
        self._nodes.collect(node_text, now, obs)
        return obs

    def _jobs(
        self,
        by_job: dict[str, list[SacctRecord]],
        rows: list[PsvRow],
        now: float,
        obs: Observations,
    ) -> None:
        psv_jobs: dict[str, list[PsvRow]] = {}
        psv_steps: dict[str, list[PsvRow]] = {}
        for row in rows:
            (psv_steps if row.step else psv_jobs).setdefault(row.job_id, []).append(row)
        for job_id, recs in by_job.items():
            recs.sort(key=lambda r: (r.start_ts or r.submit_ts or 0.0, r.end_ts or float("inf")))
            job = self._job(recs, psv_jobs.get(job_id, []), psv_steps.get(job_id, []))
            for event in self._job_events(job, recs, now):
                obs.events.append(event)
            fp = job.model_dump_json()
            if self._job_fp.get(job_id) != fp:
                self._remember(self._job_fp, job_id, fp)
                obs.jobs.append(job)

    def _job(self, recs: list[SacctRecord], psv: list[PsvRow], steps: list[PsvRow]) -> Job:
        cur = recs[-1]
        exit_code, signal, exit_from = self._exit_of(cur, psv, steps)
        restarts = max(_requeues_seen(recs), self._restarts.get(cur.job_id, 0))
        self._remember(self._restarts, cur.job_id, restarts)
        stdout, stderr = self._paths.get(cur.job_id, (None, None))
        payload: dict[str, object] = {"alloc_tres": cur.alloc_tres, "exit_code_from": exit_from}
        if stdout or stderr:
            payload |= {"stdout": stdout, "stderr": stderr}
        if cur.workdir:
            payload["workdir"] = cur.workdir
        if cur.array_job_id:
            payload |= {"array_job_id": cur.array_job_id, "array_task_id": cur.array_task_id}
        if len(recs) > 1:
            payload["requeues"] = [
                {"state": r.state, "start_ts": r.start_ts, "end_ts": r.end_ts, "nodes": r.nodes}
                for r in recs[:-1]
            ]
        return Job(
            scheduler=Scheduler.SLURM,
            job_id=cur.job_id,
            cluster=self.cluster,
            name=cur.name,
            user=cur.user,
            account=cur.account,
            partition=cur.partition,
            state=cur.state,
            reason=cur.reason,
            submit_ts=cur.submit_ts,
            start_ts=cur.start_ts,
            end_ts=cur.end_ts if cur.state in TERMINAL_STATES else None,
            exit_code=exit_code,
            signal=signal,
            nodes=cur.nodes,
            gpus=cur.gpus,
            restart_count=restarts,
            payload=payload,
        )

    @staticmethod
    def _exit_of(
        cur: SacctRecord, psv: list[PsvRow], steps: list[PsvRow]
    ) -> tuple[int | None, int | None, str | None]:
        """Exit code and signal: `sacct -P` first (the JSON job-level code is always 0)."""
        if cur.state not in TERMINAL_STATES:
            return None, None, None
        # With -D there is one job line per run, oldest first, like the JSON records.
        row = psv[-1] if psv else None
        run = [s for s in steps if cur.start_ts is None or (s.start_ts or 0) >= cur.start_ts]
        step_sig = next((s.signal for s in run if s.signal), None)
        signal = (row.signal if row and row.signal else None) or cur.step_signal or step_sig
        if row is not None and row.exit_code is not None:
            return row.exit_code, signal, row.origin
        if cur.step_rc is not None:
            return cur.step_rc, signal, "sacct --json steps"
        return (0, signal, "state") if cur.state == "COMPLETED" else (None, signal, None)

    def _job_events(self, job: Job, recs: list[SacctRecord], now: float) -> list[Event]:
        events: list[Event] = []
        # Runs whose records fell out of the window still count: number the visible ones last.
        offset = max(0, job.restart_count - _requeues_seen(recs))
        for i, rec in enumerate(recs):
            last = i == len(recs) - 1
            r = offset + i
            states: list[tuple[str, float]] = []
            if rec.state == "PENDING":
                states.append(("PENDING", rec.submit_ts or now))
            if rec.start_ts and rec.state != "PENDING":
                states.append(("RUNNING", rec.start_ts))
            if rec.state not in ("PENDING", "RUNNING"):
                states.append((rec.state, rec.end_ts or now))
            for state, ts in states:
                key = f"{self.cluster}:{job.job_id}:{state}:{r}"
                if key in self._emitted:
                    continue
                self._remember(self._emitted, key, None)
                events.append(self._job_event(job, rec, state, ts, r, key, last))
        return events

    def _job_event(
        self, job: Job, rec: SacctRecord, state: str, ts: float, restart: int, key: str, last: bool
    ) -> Event:
        final = last and state == job.state and state in TERMINAL_STATES
        code = job.exit_code if final else None
        text = f"slurm job {job.job_id} ({job.name}) {state}"
        if code is not None:
            text += f" exit {code}"
        if final and job.signal:
            text += f" signal {job.signal}"
        if rec.nodes:
            text += f" on {','.join(rec.nodes)}"
        return Event(
            ts=ts,
            node=rec.nodes[0] if len(rec.nodes) == 1 else None,
            source=self.name,
            kind=EventKind.JOB_STATE,
            job_id=job.job_id,
            code=code,
            severity=_SEVERITY.get(state, Severity.INFO),
            message=text,
            payload={
                "cluster": self.cluster,
                "state": state,
                "reason": rec.reason,
                "exit_code": code,
                "signal": job.signal if final else None,
                "restart_count": restart,
                "nodes": rec.nodes,
                "gpus": rec.gpus,
            },
            dedup_key=key,
        )

    # --- allocations ---

    def _allocations(
        self,
        ctl: dict[str, ScontrolJob],
        by_job: dict[str, list[SacctRecord]],
        now: float,
        obs: Observations,
    ) -> None:
        running = {
            j.job_id: j for j in ctl.values() if j.state in _HOLDING and j.gpu_idx and j.start_ts
        }
        for job_id, held in list(self._open.items()):
            job = running.get(job_id)
            if job is not None and job.start_ts == held.start_ts:
                continue
            end = self._end_of(job_id, held.start_ts, ctl.get(job_id), by_job, now)
            obs.allocations.extend(a.model_copy(update={"end_ts": end}) for a in held.allocations)
            del self._open[job_id]
        for job_id, job in running.items():
            if job_id in self._open or job.start_ts is None:
                continue
            allocs = [
                Allocation(
                    scheduler=Scheduler.SLURM,
                    job_id=job_id,
                    node=node,
                    gpu_index=idx,
                    start_ts=job.start_ts,
                )
                for node, indices in job.gpu_idx.items()
                for idx in indices
            ]
            self._open[job_id] = _Open(job.start_ts, allocs)
            obs.allocations.extend(allocs)

    @staticmethod
    def _end_of(
        job_id: str,
        start_ts: float,
        ctl_job: ScontrolJob | None,
        by_job: dict[str, list[SacctRecord]],
        now: float,
    ) -> float:
        """When the run that started at start_ts ended: accounting, then slurmctld, then now."""
        for rec in by_job.get(job_id, []):
            if rec.start_ts == start_ts and rec.end_ts:
                return rec.end_ts
        if ctl_job is not None and ctl_job.state in TERMINAL_STATES and ctl_job.end_ts:
            return min(ctl_job.end_ts, now)
        return now

    def _remember(self, store: OrderedDict[str, Any], key: str, value: Any) -> None:
        store[key] = value
        store.move_to_end(key)
        while len(store) > self._max:
            store.popitem(last=False)
