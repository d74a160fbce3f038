"""W&B source on run directories written by the real wandb library in offline mode."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.orm import Session

from collector.wandb import RunStatus, WandbSource, build_wandb_source
from collector.wandb.source import ProgressTracker
from timeline import queries, service
from timeline.models import Batch, EventKind, Job, Scheduler
from timeline.settings import Settings

MAKE_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "wandb" / "make_run.py"
MIN = 60.0


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three real offline runs: a Slurm job's (finished), a pod's (exit 1), one killed mid-run."""
    root = tmp_path_factory.mktemp("wandb_runs")
    env = os.environ | {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(root),
        "WANDB_SILENT": "true",
        "SLURM_JOB_ID": "4242",
    }
    procs = [
        subprocess.Popen([sys.executable, str(MAKE_RUN), kind], env=env)
        for kind in ("slurm", "pod", "crashed")
    ]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0, 0, 1]
    return root


def run_file(root: Path, link: str) -> Path:
    """The .wandb file of the run whose config names the pod `link`."""
    source = WandbSource([root])
    source.collect()
    return next(r.path for r in source.runs if r.status.config_links.get("k8s_pod") == link)


def by_job(events: list[Any], kind: EventKind) -> dict[str | None, Any]:
    """Events of one kind keyed by job id."""
    return {e.job_id: e for e in events if e.kind == kind}


def test_runs_are_linked_to_their_jobs_and_report_last_step(runs_root: Path) -> None:
    source = WandbSource([runs_root], stall_after_s=30 * MIN)
    progress = by_job(source.collect().events, EventKind.PROGRESS)
    # SLURM_JOB_ID recorded by wandb itself in the run metadata: no script change needed.
    slurm = progress["4242"]
    assert slurm.payload["step"] == 4 and slurm.payload["state"] == "finished" and slurm.code == 0
    pod = progress["ml-research/train-llama-0"]
    assert pod.payload["step"] == 2 and pod.payload["state"] == "failed" and pod.code == 1
    assert pod.payload["wandb_run"].startswith("/llm/")
    assert slurm.ts == pytest.approx(slurm.payload["step_ts"])
    assert source.health.total_parse_failures() == 0


def test_a_runs_config_names_its_checkpoint_dir_for_the_healer(runs_root: Path) -> None:
    obs = WandbSource([runs_root], stall_after_s=30 * MIN).collect()
    progress = by_job(obs.events, EventKind.PROGRESS)
    assert progress["ml-research/train-llama-0"].payload["checkpoint_dir"] == "/shared/ckpt/llama"
    assert progress["4242"].payload["checkpoint_dir"] is None  # its config names none


def test_killed_run_shows_the_steps_wandb_flushed_and_counts_as_running(runs_root: Path) -> None:
    source = WandbSource([runs_root], clock=lambda: 0.0)
    ev = by_job(source.collect().events, EventKind.PROGRESS)["777"]
    assert ev.payload["state"] == "running" and ev.code is None
    assert 0 < ev.payload["step"] < 400  # wandb-core writes 32 KiB blocks; the tail was lost


def test_running_job_with_no_step_for_n_minutes_is_stalled_once(runs_root: Path) -> None:
    now = [0.0]
    source = WandbSource(
        [runs_root], clock=lambda: now[0], stall_after_s=30 * MIN, job_state=lambda j: "RUNNING"
    )
    source.collect()
    crashed = next(r.status for r in source.runs if not r.status.finished)
    assert crashed.last_step_ts is not None
    now[0] = crashed.last_step_ts + 29 * MIN
    for r in source.runs:
        r.path.touch()  # wandb flushed recently: nothing proves a stall yet
    assert not by_job(source.collect().events, EventKind.PROGRESS_STALLED)
    now[0] = crashed.last_step_ts + 31 * MIN
    crashed_path = next(r.path for r in source.runs if r.status is crashed)
    os.utime(crashed_path, (crashed.last_step_ts, crashed.last_step_ts))  # nothing since
    stalled = by_job(source.collect().events, EventKind.PROGRESS_STALLED)
    assert list(stalled) == ["777"]
    assert stalled["777"].payload["step"] == crashed.last_step
    assert stalled["777"].payload["stalled_for_s"] == pytest.approx(31 * MIN)
    assert not by_job(source.collect().events, EventKind.PROGRESS_STALLED), "reported twice"


def test_no_stall_when_the_scheduler_says_the_job_is_not_running(runs_root: Path) -> None:
    source = WandbSource(
        [runs_root], clock=lambda: 1e10, stall_after_s=MIN, job_state=lambda j: "COMPLETED"
    )
    source.max_age_s = 1e11  # old run dirs are skipped otherwise
    events = source.collect().events
    assert "777" in by_job(events, EventKind.PROGRESS)  # the killed run, seen as running
    assert not by_job(events, EventKind.PROGRESS_STALLED)


def test_records_written_later_prove_a_stall_despite_recent_flushes() -> None:
    tracker = ProgressTracker(stall_after_s=30 * MIN)
    status = RunStatus(run_id="r", project="p", last_step=10, last_step_ts=1000.0)
    status.file_mtime = 1000.0 + 40 * MIN  # flushed just now: system stats kept coming
    status.last_record_ts = 1000.0 + 35 * MIN
    events = tracker.events(status, now=1000.0 + 40 * MIN)
    assert [e.kind for e in events] == [EventKind.PROGRESS, EventKind.PROGRESS_STALLED]
    status.last_record_ts = 1000.0 + 20 * MIN
    fresh = ProgressTracker(stall_after_s=30 * MIN).events(status, now=1000.0 + 40 * MIN)
    assert [e.kind for e in fresh] == [EventKind.PROGRESS]


def test_a_run_file_read_while_being_written_resumes_without_repeats(
    runs_root: Path, tmp_path: Path
) -> None:
    src = run_file(runs_root, "ml-research/train-llama-0")
    data = src.read_bytes()
    dst = tmp_path / "wandb" / src.parent.name / src.name
    dst.parent.mkdir(parents=True)
    dst.write_bytes(data[: len(data) // 2 + 3])  # cut mid-chunk, as a reader may see it
    source = WandbSource([tmp_path], clock=lambda: 0.0)
    first = by_job(source.collect().events, EventKind.PROGRESS)
    assert not source.runs[0].status.finished
    with dst.open("ab") as fh:
        fh.write(data[len(data) // 2 + 3 :])
    second = by_job(source.collect().events, EventKind.PROGRESS)
    assert second["ml-research/train-llama-0"].payload["state"] == "failed"
    assert source.runs[0].status.finished and source.runs[0].status.last_step == 2
    if first:
        assert first["ml-research/train-llama-0"].payload["step"] <= 2
    assert not source.collect().events, "nothing new: nothing emitted"
    assert source.health.total_parse_failures() == 0


def _copy(runs_root: Path, tmp_path: Path, mutate: Callable[[bytearray], None]) -> WandbSource:
    src = run_file(runs_root, "ml-research/train-llama-0")
    data = bytearray(src.read_bytes())
    mutate(data)
    dst = tmp_path / "wandb" / src.parent.name / src.name
    dst.parent.mkdir(parents=True)
    dst.write_bytes(bytes(data))
    return WandbSource([tmp_path], clock=lambda: 0.0)


def test_corrupt_chunk_is_counted_and_the_rest_still_read(runs_root: Path, tmp_path: Path) -> None:
    def flip(data: bytearray) -> None:
        data[60] ^= 0xFF  # inside the first record after the header

    source = _copy(runs_root, tmp_path, flip)
    progress = by_job(source.collect().events, EventKind.PROGRESS)
    assert source.health.parse_failures["wandb_crc"] == 1
    assert progress  # later records (steps, exit) still arrive


def test_not_a_wandb_file_is_counted_once_and_skipped(runs_root: Path, tmp_path: Path) -> None:
    def garbage(data: bytearray) -> None:
        data[:7] = b"GARBAGE"

    source = _copy(runs_root, tmp_path, garbage)
    assert source.collect().is_empty()
    assert source.collect().is_empty()
    assert source.health.parse_failures["wandb_header"] == 1


def test_latest_run_symlink_is_not_read_twice(runs_root: Path, tmp_path: Path) -> None:
    shutil.copytree(runs_root / "wandb", tmp_path / "wandb", symlinks=True)
    assert (tmp_path / "wandb" / "latest-run").is_symlink()
    assert len(list(WandbSource([tmp_path]).run_files())) == 3


class _Runs:
    """Stands in for wandb.Api (W&B cloud is unreachable here): `runs(path, filters)` -> runs."""

    def __init__(self, runs: list[Any]) -> None:
        self._runs = runs
        self.calls: list[tuple[str, Any]] = []

    def runs(self, path: str, filters: dict[str, Any] | None = None) -> list[Any]:
        """Runs of one entity/project, like wandb.apis.public.Api.runs."""
        self.calls.append((path, filters))
        if path == "down/project":
            raise ConnectionError("api.wandb.ai unreachable")
        return self._runs


def test_public_api_runs_give_progress_and_stalls() -> None:
    run = SimpleNamespace(
        id="abc123",
        entity="team",
        project="llm",
        state="running",
        config={"slurm_job_id": "55"},
        summary={"_step": 1200, "_timestamp": 1000.0, "loss": 0.3},
        metadata=None,
    )
    api = _Runs([run])
    source = WandbSource(
        [], api=api, projects=["team/llm", "down/project"], clock=lambda: 1000.0 + 31 * MIN
    )
    events = source.collect().events
    assert [(e.kind, e.job_id) for e in events] == [
        (EventKind.PROGRESS, "55"),
        (EventKind.PROGRESS_STALLED, "55"),
    ]
    assert events[0].payload["wandb_run"] == "team/llm/abc123"
    assert api.calls[0] == ("team/llm", {"state": "running"})
    assert source.health.errors["api"] == 1


def test_build_wandb_source_reads_settings(runs_root: Path) -> None:
    settings = Settings(wandb_dirs=[runs_root], wandb_stall_minutes=5)
    source = build_wandb_source(settings, job_state=lambda j: None, clock=lambda: 0.0)
    assert source.tracker.stall_after_s == 300.0 and source.api is None
    assert len(list(source.run_files())) == 3


def test_recorded_wandb_0_31_run_file_still_parses(tmp_path: Path) -> None:
    recorded = Path(__file__).resolve().parents[1] / "fixtures" / "wandb"
    source = WandbSource([recorded], clock=lambda: 0.0, max_age_s=float("inf"))
    (progress,) = source.collect().events
    (run,) = source.runs
    assert (run.status.run_id, run.status.project, run.status.slurm_job_id) == (
        "d2whbl17",
        "llm",
        "4242",
    )
    assert (progress.kind, progress.job_id, progress.code) == (EventKind.PROGRESS, "4242", 0)
    assert progress.payload["step"] == 4 and run.status.finished
    assert source.health.total_parse_failures() == 0


def test_progress_is_stored_once_across_source_restarts(session: Session) -> None:
    recorded = Path(__file__).resolve().parents[1] / "fixtures" / "wandb"
    for _ in range(2):  # a restarted server reads the run again from the start
        events = WandbSource([recorded], max_age_s=float("inf")).collect().events
        batch = Batch(agent="server:wandb", node="server:wandb", batch_id=uuid.uuid4().hex)
        service.append_batch(session, batch=batch.model_copy(update={"events": events}))
        session.commit()
    (stored,) = queries.events_in_window(session, kind="progress")
    assert (stored["job_id"], stored["source"]) == ("4242", "wandb")


def test_each_run_is_linked_on_its_job_through_a_patch(runs_root: Path, session: Session) -> None:
    source = WandbSource([runs_root], stall_after_s=30 * MIN)
    obs = source.collect()
    patches = {p.job_id: p.wandb_run for p in obs.job_patches}
    assert patches["4242"] is not None and patches["4242"].startswith("/")
    job = Job(scheduler=Scheduler.SLURM, job_id="4242", state="COMPLETED", user="alice")
    service.upsert_jobs(session, jobs=[job], now=1.0)
    service.patch_jobs(session, patches=obs.job_patches)
    session.commit()
    stored = queries.get_job(session, job_id="4242")
    assert stored is not None
    assert stored["wandb_run"] == patches["4242"] and stored["user"] == "alice"  # nothing else lost
