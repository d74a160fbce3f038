"""W&B source: last logged step per run, linked to its Slurm job or pod; stalls of running jobs.

Linking: wandb itself records SLURM_JOB_ID in the run's metadata (`environment.slurm["job_id"]`),
so Slurm jobs link with no change to the training script. A Kubernetes pod (or any job) links by
one line in the script:

    wandb.init(config={"k8s_pod": f"{os.environ['POD_NAMESPACE']}/{os.environ['POD_NAME']}"})

(POD_NAMESPACE / POD_NAME from the downward API), or `config={"slurm_job_id":
os.environ.get("SLURM_JOB_ID")}` / `config={"fleetmedic_job_id": ...}` to name the job outright.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from collector.base import Observations
from collector.health import SourceHealth
from collector.wandb.runfile import RunFile, RunStatus, read_new_records
from timeline.models import Event, EventKind, JobPatch, Severity

SOURCE = "wandb"
RUNNING_JOB_STATES = frozenset({"RUNNING", "Running"})
JobState = Callable[[str], str | None]  # job_id -> the scheduler's state word, None if unknown


def job_link(status: RunStatus) -> str | None:
    """The job a run belongs to: fleetmedic_job_id, k8s_pod, slurm_job_id, then wandb's own."""
    links = status.config_links
    for key in ("fleetmedic_job_id", "k8s_pod", "slurm_job_id", "SLURM_JOB_ID"):
        if links.get(key):
            return links[key]
    return status.slurm_job_id


class ProgressTracker:
    """Turns run statuses into PROGRESS / PROGRESS_STALLED events, each fact once."""

    def __init__(self, *, stall_after_s: float, job_state: JobState | None = None) -> None:
        self.stall_after_s = stall_after_s
        self.job_state = job_state
        self._reported: dict[str, tuple[Any, ...]] = {}  # run path -> (step, finished)
        self._stalled: set[str] = set()  # run path:step already reported as stalled

    def events(self, status: RunStatus, now: float) -> list[Event]:
        """Progress when the step or end changed since the last call; a stall once per step."""
        out: list[Event] = []
        job_id = job_link(status)
        key = (status.last_step, status.finished, status.state)
        if status.last_step is not None and self._reported.get(status.path) != key:
            self._reported[status.path] = key
            out.append(self._progress(status, job_id))
        if self._is_stalled(status, job_id, now):
            tag = f"{status.path}:{status.last_step}"
            if tag not in self._stalled:
                self._stalled.add(tag)
                out.append(self._stall(status, job_id, now))
        return out

    def _is_stalled(self, status: RunStatus, job_id: str | None, now: float) -> bool:
        if status.finished or status.state not in ("running", "Running"):
            return False
        if self.job_state is not None and job_id is not None:
            state = self.job_state(job_id)
            if state is not None and state not in RUNNING_JOB_STATES:
                return False  # the job ended or waits: silence is not a stall
        since = status.last_step_ts or status.start_ts
        if since is None:
            return False
        n = self.stall_after_s
        # wandb-core writes the run file in 32 KiB blocks, so steps after the last flush are not
        # visible yet. Stalled means: records written later prove N minutes alive without a step,
        # or nothing at all was flushed for N minutes (a live wandb-core flushes its periodic
        # system-stats records well within that).
        if status.last_record_ts is not None and status.last_record_ts - since >= n:
            return True
        quiet = status.file_mtime is None or now - status.file_mtime >= n
        return now - since >= n and quiet

    def _progress(self, status: RunStatus, job_id: str | None) -> Event:
        end = f", {status.state} exit {status.exit_code}" if status.finished else ""
        return Event(
            ts=status.last_step_ts or status.start_ts or 0.0,
            node=status.host if status.slurm_job_id else None,
            source=SOURCE,
            kind=EventKind.PROGRESS,
            job_id=job_id,
            code=status.exit_code if status.finished else None,
            message=f"W&B run {status.path} at step {status.last_step}{end}",
            payload=_payload(status),
            dedup_key=f"{status.path}:step:{status.last_step}:{status.state}"[:255],
        )

    def _stall(self, status: RunStatus, job_id: str | None, now: float) -> Event:
        since = status.last_step_ts or status.start_ts or now
        minutes = (now - since) / 60
        what = f"step {status.last_step}" if status.last_step is not None else "no step yet"
        return Event(
            ts=now,
            node=status.host if status.slurm_job_id else None,
            source=SOURCE,
            kind=EventKind.PROGRESS_STALLED,
            job_id=job_id,
            severity=Severity.WARNING,
            message=f"W&B run {status.path}: no step logged for {minutes:.0f} min ({what})",
            payload=_payload(status) | {"stalled_for_s": now - since},
            dedup_key=f"{status.path}:stalled:{status.last_step}"[:255],
        )


def _payload(status: RunStatus) -> dict[str, Any]:
    return {
        "wandb_run": status.path,
        "step": status.last_step,
        "step_ts": status.last_step_ts,
        "state": status.state,
        "exit_code": status.exit_code,
        "host": status.host,
        "start_ts": status.start_ts,
        "checkpoint_dir": status.checkpoint_dir,  # the run's config names where it saves
    }


class WandbSource:
    """Polled source over wandb run directories (offline or synced) and, optionally, the API."""

    name = SOURCE

    def __init__(
        self,
        roots: Sequence[Path],
        *,
        stall_after_s: float = 1800.0,
        clock: Callable[[], float] = time.time,
        job_state: JobState | None = None,
        api: Any = None,
        projects: Sequence[str] = (),
        max_age_s: float = 7 * 86400.0,
    ) -> None:
        self.roots = [Path(r) for r in roots]
        self.clock = clock
        self.api = api
        self.projects = list(projects)
        self.max_age_s = max_age_s
        self.health = SourceHealth(self.name)
        self.tracker = ProgressTracker(stall_after_s=stall_after_s, job_state=job_state)
        self._files: dict[Path, RunFile] = {}

    @property
    def runs(self) -> list[RunFile]:
        """The run files read so far, with what each says."""
        return list(self._files.values())

    def run_files(self) -> Iterable[Path]:
        """Every run-*.wandb under the roots (`<root>/wandb/*run-*/` or `<root>/*run-*/`)."""
        for root in self.roots:
            for pattern in ("wandb/*run-*/run-*.wandb", "*run-*/run-*.wandb"):
                for path in sorted(root.glob(pattern)):
                    if not path.parent.is_symlink():  # wandb/latest-run points at a run dir
                        yield path

    def collect(self) -> Observations:
        """Read what runs appended since the last call; never raises."""
        from wandb.proto import wandb_internal_pb2

        record = wandb_internal_pb2.Record  # type: ignore[attr-defined]
        now = self.clock()
        obs = Observations()
        for path in self.run_files():
            try:
                if path not in self._files and now - path.stat().st_mtime > self.max_age_s:
                    continue
                run = self._files.setdefault(path, RunFile(path=path))
                if run.offset >= 0:
                    read_new_records(run, record, self.health.parse_failure)
                run.status.file_mtime = path.stat().st_mtime
                obs.events.extend(self.tracker.events(run.status, now))
            except OSError as exc:
                self.health.error("run_file_unreadable", exc)
        if self.api is not None:
            obs.events.extend(self._collect_api(now))
        # Each run's path is stored on its job, so the job page and the healer can find it.
        links = {(e.job_id, e.payload["wandb_run"]) for e in obs.events if e.job_id}
        obs.job_patches = [JobPatch(job_id=j, wandb_run=run) for j, run in sorted(links)]
        return obs

    def _collect_api(self, now: float) -> list[Event]:
        out: list[Event] = []
        for project in self.projects:
            try:
                for run in self.api.runs(project, filters={"state": "running"}):
                    out.extend(self.tracker.events(status_from_api_run(run), now))
            except Exception as exc:  # network, auth, W&B outage: count, keep the offline part
                self.health.error("api", exc)
        return out


def status_from_api_run(run: Any) -> RunStatus:
    """A RunStatus from a `wandb.Api().runs(...)` Run (config, summary, state)."""
    summary = dict(run.summary or {})
    config = dict(run.config or {})
    status = RunStatus(run_id=run.id, entity=run.entity, project=run.project)
    for key in ("fleetmedic_job_id", "k8s_pod", "slurm_job_id", "SLURM_JOB_ID"):
        if config.get(key):
            status.config_links[key] = str(config[key])
    ckpt = config.get("checkpoint_dir") or config.get("fleetmedic_checkpoint_dir")
    status.checkpoint_dir = str(ckpt)[:1024] if isinstance(ckpt, str) and ckpt else None
    step, ts = summary.get("_step"), summary.get("_timestamp")
    status.last_step = int(step) if isinstance(step, int | float) else None
    status.last_step_ts = float(ts) if isinstance(ts, int | float) else None
    state = str(run.state or "").lower()
    status.state = state or "running"
    status.finished = state in ("finished", "failed", "crashed", "killed")
    if not status.config_links:
        # wandb-metadata.json carries SLURM_* as "slurm": {"job_id": ...}; fetching it is a
        # download, so only when the config does not name the job.
        meta = run.metadata or {}
        slurm = meta.get("slurm") if isinstance(meta, dict) else None
        if isinstance(slurm, dict) and slurm.get("job_id"):
            status.slurm_job_id = str(slurm["job_id"])
        status.host = meta.get("host") if isinstance(meta, dict) else None
    return status
