"""JobLogSource following real job logs as they grow: chunks, rotation, truncation, bounds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from collector.health import SourceHealth
from collector.joblog import JobLogSource, JobLogTarget, SlurmJobLogs
from collector.parse.common import MAX_LINE
from collector.parse.follow import FileFollower
from collector.slurm.runner import CommandResult, RecordedRunner
from timeline.models import Event, EventKind

FIX = Path(__file__).parent.parent / "fixtures" / "joblog"


class Clock:
    """A settable clock: tests move time instead of sleeping."""

    def __init__(self, now: float = 1_795_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _source(targets: list[JobLogTarget], clock: Clock, **kw: Any) -> JobLogSource:
    return JobLogSource(
        node="gpu-node-07", targets=lambda: targets, clock=clock, health=SourceHealth("jl"), **kw
    )


def _drain(src: JobLogSource, clock: Clock) -> list[Event]:
    clock.now += 60.0  # past every flood window
    return src.collect().events


def test_follows_a_growing_log_and_emits_each_event_once(tmp_path: Path) -> None:
    log = tmp_path / "slurm-4242.out"
    lines = (FIX / "llamafactory7396_watchdog.log").read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:2]))
    clock = Clock()
    src = _source([JobLogTarget("4242", str(log))], clock)
    first = src.collect().events + _drain(src, clock)
    assert {e.payload["rank"] for e in first} == {0, 4}
    assert all(e.job_id == "4242" and e.node == "gpu-node-07" for e in first)
    with log.open("a") as f:
        f.writelines(lines[2:])
    later = src.collect().events + _drain(src, clock)
    # Both ranks printed the same line: it goes out once, its repeat follows as a count.
    assert [(e.payload.get("last_enqueued"), e.count) for e in later] == [(1582, 1), (1582, 1)]
    assert later[1].payload["repeat"] is True and later[0].payload["log_path"] == str(log)
    assert later[0].dedup_key != later[1].dedup_key
    assert _drain(src, clock) == []


def test_a_line_split_across_reads_is_parsed_once_whole(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    text = (FIX / "h100_torch_cuda_oom.stderr").read_text()
    cut = text.index("Tried to allocate") + 5
    log.write_text(text[:cut])
    clock = Clock()
    src = _source([JobLogTarget("7", str(log))], clock)
    assert src.collect().events + _drain(src, clock) == []
    with log.open("a") as f:
        f.write(text[cut:])
    (ev,) = src.collect().events + _drain(src, clock)
    assert ev.kind is EventKind.CUDA_OOM and ev.payload["tried"] == "200.00 GiB"
    assert ev.payload["offset"] == text.index("torch.OutOfMemoryError")


def test_dedup_keys_are_stable_when_the_agent_rereads_a_log(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text((FIX / "nccl1814_net_ib_status.log").read_text())
    keys = []
    for _ in range(2):
        clock = Clock()
        src = _source([JobLogTarget("9", str(log))], clock)
        keys.append(sorted(str(e.dedup_key) for e in src.collect().events + _drain(src, clock)))
    assert keys[0] == keys[1] and len(keys[0]) == 2


def test_truncated_log_is_read_again_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text((FIX / "elastic_failed_lines.log").read_text())
    clock = Clock()
    src = _source([JobLogTarget("1", str(log))], clock)
    assert len(src.collect().events + _drain(src, clock)) == 2
    log.write_text((FIX / "slurm_canu1067_old_cancel.log").read_text())  # shorter: truncated
    (ev,) = src.collect().events + _drain(src, clock)
    assert ev.kind is EventKind.JOB_STATE and ev.payload["reason"] == "TIME LIMIT"


def test_rotated_log_is_drained_then_the_new_file_read(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text("epoch 1\n")
    clock = Clock()
    src = _source([JobLogTarget("1", str(log))], clock)
    src.collect()
    with log.open("a") as f:
        f.write((FIX / "slurm_tusas149_oom_stepid.log").read_text().splitlines()[0] + "\n")
    os.rename(log, tmp_path / "out.log.1")
    log.write_text((FIX / "h100_torch_cuda_oom.stderr").read_text())
    events = src.collect().events + _drain(src, clock)
    assert {e.kind for e in events} == {EventKind.HOST_OOM, EventKind.CUDA_OOM}


def test_huge_lines_are_cut_and_reads_are_bounded_per_pass(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    with log.open("w") as f:
        f.write("x" * (MAX_LINE * 5) + "\n")
        for _ in range(2000):
            f.write("step 1 loss 2.0\n")
        f.write("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    size = log.stat().st_size
    follower = FileFollower(str(log), max_bytes=4096)
    seen, passes = [], 0
    while follower.offset < size and passes < 1000:
        before = follower.offset
        got = follower.read_lines()
        passes += 1
        assert follower.offset - before <= 4096
        assert all(len(text) <= MAX_LINE for _, text in got)
        seen += got
    assert passes >= size // 4096
    assert seen[0][1] == "x" * MAX_LINE and seen[1][1] == "step 1 loss 2.0"
    assert seen[-1][1].startswith("RuntimeError: CUDA error")


def test_first_open_of_a_big_log_starts_near_its_end(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    with log.open("w") as f:
        for i in range(10_000):
            f.write(f"step {i} loss 1.0\n")
        f.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    follower = FileFollower(str(log), tail_bytes=1024)
    got = follower.read_lines()
    assert len(got) < 100 and got[-1][1].startswith("torch.OutOfMemoryError")
    assert got[0][1].startswith("step ")  # the cut first line was dropped, the next is whole


def test_finished_job_is_flushed_and_closed(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text((FIX / "cppo6_childfailed_sigkill.log").read_text())
    targets = [JobLogTarget("77", str(log))]
    clock = Clock()
    src = JobLogSource(node="n", targets=lambda: targets, clock=clock)
    assert src.collect().events == []  # the ChildFailedError block and flood window are held
    targets.clear()
    (ev,) = src.collect().events
    assert ev.kind is EventKind.CHILD_FAILED and ev.code == -9 and src.following() == []


def test_missing_file_and_failing_target_lister_never_crash(tmp_path: Path) -> None:
    health = SourceHealth("jl-errors")
    calls = [0]

    def targets() -> list[JobLogTarget]:
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("scontrol timed out")
        return [JobLogTarget("5", str(tmp_path / "not-yet.out"))]

    src = JobLogSource(node="n", targets=targets, clock=Clock(), health=health)
    assert src.collect().events == []
    assert src.collect().events == []
    assert health.errors["targets_failed"] == 1 and len(src.following()) == 1
    (tmp_path / "not-yet.out").write_text("srun: error: n1: task 0: Out Of Memory\n")
    (ev,) = src.collect().events + src.close()
    assert ev.kind is EventKind.HOST_OOM


def test_the_source_passes_on_unrecognised_failure_lines_and_counts_those_over_the_bound(
    tmp_path: Path,
) -> None:
    log = tmp_path / "slurm-77.out"
    lines = [f"shard {i}: could not open /data/part-{i}.bin, skipping\n" for i in range(260)]
    log.write_text("step 1 loss 2.3\n" + "".join(lines))
    clock = Clock()
    src = _source([JobLogTarget("77", str(log))], clock)
    events = src.collect().events + src.close()
    assert len(events) == 200 and all(e.payload["unclassified"] for e in events)
    assert all(e.kind is EventKind.OTHER and e.job_id == "77" for e in events)
    assert src.health.parse_failures["unclassified_over_bound"] == 60


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.log")))
def test_every_recorded_log_parses_through_the_source(tmp_path: Path, name: str) -> None:
    log = tmp_path / name
    log.write_text((FIX / name).read_text())
    clock = Clock()
    src = _source([JobLogTarget("1", str(log))], clock)
    events = src.collect().events + src.close()
    assert events, name
    assert all(e.raw and e.source == "joblog" for e in events)


SLURM_FIX = Path(__file__).parent.parent / "fixtures" / "slurm"


def test_slurm_targets_are_running_jobs_whose_batch_host_is_this_node() -> None:
    runner = RecordedRunner(
        replies={"scontrol show job": (SLURM_FIX / "scontrol_show_job_d_multinode.txt").read_text()}
    )
    on_node1 = SlurmJobLogs(node="node1", runner=runner)()
    assert [(t.job_id, t.path) for t in on_node1] == [
        ("1", "/tmp/fm-slurm-dev/jobs/multi-1.out"),
        ("2", "/tmp/fm-slurm-dev/jobs/single-2.out"),
        ("3", "/tmp/fm-slurm-dev/jobs/multi2-3.out"),
    ]  # StdOut and StdErr are the same file: followed once
    assert SlurmJobLogs(node="node2", runner=runner)() == []  # node2 runs tasks, not the batch


def test_failing_scontrol_keeps_following_what_was_followed(tmp_path: Path) -> None:
    log = tmp_path / "multi-1.out"
    log.write_text("")
    text = (SLURM_FIX / "scontrol_show_job_d_multinode.txt").read_text()
    runner = RecordedRunner(
        replies={"scontrol show job": text.replace("/tmp/fm-slurm-dev/jobs", str(tmp_path))}
    )
    health = SourceHealth("jl-slurm")
    src = JobLogSource(
        node="node1", targets=SlurmJobLogs(node="node1", runner=runner), health=health
    )
    src.collect()
    runner.replies["scontrol show job"] = CommandResult(
        ("scontrol",), None, "", "", True, "timeout"
    )
    log.write_text(
        "slurmstepd: error: *** JOB 1 ON node1 CANCELLED AT 2026-11-22T12:20:00 "
        "DUE TO TIME LIMIT ***\n"
    )
    events = src.collect().events
    assert health.errors["targets_failed"] == 1 and len(src.following()) == 3
    (ev,) = events + src.close()
    assert ev.job_id == "1" and ev.payload["reason"] == "TIME LIMIT"


def test_streamed_nccl_error_still_gets_its_last_error_line(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    lines = (FIX / "nccl1410_unhandled_cuda_error.log").read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:3]))  # the cause line has not been written yet
    clock = Clock()
    src = _source([JobLogTarget("8", str(log))], clock)
    first = src.collect().events
    assert [e.payload.get("error") for e in first] == ["unhandled cuda error"]
    with log.open("a") as f:
        f.write(lines[3])
    (nccl,) = src.collect().events
    assert nccl.payload["last_error"] == "Cuda failure 1 'invalid argument'"
    assert nccl.raw is not None and nccl.raw.count("\n") == 2


def test_streamed_nccl_error_without_a_cause_is_released_after_a_moment(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text((FIX / "sglang5594_socket_abort.log").read_text().splitlines()[0] + "\n")
    clock = Clock()
    src = _source([JobLogTarget("8", str(log))], clock)
    assert src.collect().events == []  # it waits one line for a possible "Last error:"
    clock.now += 2.0
    (ev,) = src.collect().events
    assert ev.payload["socket_error"] == "Software caused connection abort"
