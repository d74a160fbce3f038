"""Job log parsing on real recorded output: CUDA errors, CUDA OOM, NCCL, elastic, Slurm."""

from __future__ import annotations

from pathlib import Path

from collector.parse.joblog import JobLogParser, parse_job_line, parse_job_text
from timeline.models import EventKind

FIX = Path(__file__).parent.parent / "fixtures" / "joblog"


def _read(name: str) -> str:
    return (FIX / name).read_text()


def test_real_torch_cuda_oom_gives_sizes_and_gpu() -> None:
    (ev,) = parse_job_text(_read("h100_torch_cuda_oom.stderr"), node="n1", job_id="42", ts=5.0)
    assert ev.kind is EventKind.CUDA_OOM and ev.code == 2
    assert ev.payload["exception"] == "torch.OutOfMemoryError"
    assert ev.payload["tried"] == "200.00 GiB" and ev.payload["tried_bytes"] == 200 * 2**30
    assert ev.payload["gpu_index"] == 0 and ev.payload["total"] == "79.18 GiB"
    assert ev.payload["free"] == "78.66 GiB"
    assert (ev.node, ev.job_id, ev.ts) == ("n1", "42", 5.0)
    assert ev.raw is not None and ev.raw.startswith("torch.OutOfMemoryError: CUDA out of memory.")


def test_real_device_side_assert_gives_the_assert_and_the_error() -> None:
    events = parse_job_text(_read("h100_torch_device_assert.stderr"))
    by_msg = {e.message: e for e in events}
    assert all(e.kind is EventKind.CUDA_ERROR and e.code == 710 for e in events)
    assert "CUDA error: device-side assert triggered" in by_msg
    assertion = next(e for e in events if "file" in e.payload)
    assert assertion.payload["file"].endswith("IndexKernel.cu") and assertion.payload["line"] == 111
    assert "index out of bounds" in assertion.payload["assertion"]


def test_real_cupy_illegal_address_repeats_collapse_into_one_counted_event() -> None:
    events = parse_job_text(_read("h100_cupy_illegal_address.stderr"))
    assert len(events) == 1
    ev = events[0]
    assert ev.kind is EventKind.CUDA_ERROR and ev.code == 700
    assert ev.payload["error"] == "illegal_memory_access" and ev.count == 3


def test_line_with_nothing_we_track_gives_none() -> None:
    assert parse_job_line("epoch 3 step 1200 loss 2.31") is None
    assert parse_job_line("") is None


def test_chunked_feed_holds_childfailed_block_until_it_ends() -> None:
    parser = JobLogParser()
    head = parser.feed("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ")
    assert head == []  # the block is still open
    for line in [
        "=" * 60,
        "train.py FAILED",
        "-" * 60,
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "-" * 60,
        "Root Cause (first observed failure):",
        "[0]:",
        "  host      : node9",
        "  rank      : 5 (local_rank: 1)",
        "  exitcode  : -9 (pid: 777)",
        "  traceback : Signal 9 (SIGKILL) received by PID 777",
        "=" * 60,
    ]:
        assert parser.feed(line) == []
    (ev,) = parser.feed("next line") + parser.flush()
    assert ev.kind is EventKind.CHILD_FAILED and ev.code == -9
    assert (ev.payload["host"], ev.payload["rank"], ev.payload["local_rank"]) == ("node9", 5, 1)
    assert ev.payload["signal"] == 9 and ev.payload["signal_name"] == "SIGKILL"
    assert ev.payload["pid"] == 777
