"""Replay source: the recorded H100 trace at its recorded pace, faster, or as fast as possible."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from collector.base import Observations
from collector.replay import ReplaySource
from timeline.models import EventKind

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "nvml" / "trace_idle_busy_idle.jsonl"


class FakeTime(threading.Event):
    """A clock plus a stop event whose wait() advances the clock instead of sleeping."""

    def __init__(self, start: float = 1000.0) -> None:
        super().__init__()
        self.now = start
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        self.now += timeout
        return self.is_set()


def _play(src: ReplaySource, stop: threading.Event) -> list[Observations]:
    got: list[Observations] = []
    src.run(got.append, stop)
    return got


def _trace() -> list[dict[str, float]]:
    return [json.loads(line) for line in TRACE.read_text().splitlines() if line.strip()]


def test_trace_plays_at_recorded_pace_rebased_to_now() -> None:
    ft = FakeTime()
    src = ReplaySource(TRACE, node="n1", gpu_uuid="GPU-x", clock=ft.clock)
    got = _play(src, ft)
    trace = _trace()
    assert len(got) == len(trace) == src.played
    assert abs(sum(ft.waits) - (trace[-1]["t"] - trace[0]["t"])) < 1e-6
    first, last = got[0].samples[0], got[-1].samples[0]
    assert first.ts == 1000.0 and abs(last.ts - (1000.0 + trace[-1]["t"] - trace[0]["t"])) < 1e-6
    assert first.gpu_uuid == "GPU-x" and first.power_w == trace[0]["power_mw"] / 1000.0
    assert [g.uuid for o in got for g in o.gpus] == ["GPU-x"]  # the GPU is named once


def test_speed_scales_the_pace() -> None:
    ft = FakeTime()
    src = ReplaySource(TRACE, node="n1", speed=10.0, clock=ft.clock)
    _play(src, ft)
    trace = _trace()
    assert abs(sum(ft.waits) - (trace[-1]["t"] - trace[0]["t"]) / 10.0) < 1e-6


def test_speed_zero_plays_everything_without_waiting_and_keeps_recorded_times() -> None:
    ft = FakeTime()
    src = ReplaySource(TRACE, node="n1", speed=0, rebase=False, clock=ft.clock)
    got = _play(src, ft)
    assert ft.waits == [] and len(got) == len(_trace())
    assert got[0].samples[0].ts == _trace()[0]["t"]


def test_typed_records_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"type": "gpu", "uuid": "GPU-1", "index": 0}\n'
        '{"type": "sample", "ts": 10.0, "util_gpu": 50}\n'
        "not json\n"
        '{"type": "event", "ts": 11.0, "source": "kmsg", "kind": "xid", "code": 79}\n'
        '{"type": "sample", "ts": "late"}\n'
    )
    ft = FakeTime()
    src = ReplaySource(path, node="n7", gpu_uuid="GPU-1", speed=0, rebase=False, clock=ft.clock)
    got = _play(src, ft)
    assert [o.size() for o in got] == [1, 1, 1]
    assert got[0].gpus[0].node == "n7" and got[1].samples[0].util_gpu == 50
    assert got[2].events[0].kind == EventKind.XID and got[2].events[0].node == "n7"
    assert src.health.total_parse_failures() == 2


def test_stop_ends_the_replay_early() -> None:
    ft = FakeTime()
    ft.set()
    src = ReplaySource(TRACE, node="n1", clock=ft.clock)
    assert len(_play(src, ft)) == 0


def test_missing_file_is_counted_not_raised(tmp_path: Path) -> None:
    ft = FakeTime()
    src = ReplaySource(tmp_path / "nope.jsonl", node="n1", clock=ft.clock)
    assert _play(src, ft) == [] and src.health.errors["open"] == 1
