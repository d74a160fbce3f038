"""Replay source: plays recorded samples and events from a JSONL file, at their pace or faster.

Two record shapes are understood, one per line:
- typed records `{"type": "sample"|"event"|"gpu", ...}` whose other keys are the fields of
  timeline.models.Sample / Event / GpuInfo (a sample may omit gpu_uuid: the source's is used);
- the H100 trace shape `{"t", "util", "mem_util", "mem_used", "power_mw", "temp", "sm_clock"}`
  (collector/recorded/trace_*.jsonl), turned into Samples of one GPU.
Times are shifted so the first record plays "now" unless `rebase=False`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from collector.base import Emit, Observations
from collector.health import SourceHealth
from timeline.models import Event, GpuInfo, Sample

_MIB = 1024.0 * 1024.0


def trace_sample(record: dict[str, Any], *, gpu_uuid: str, ts: float) -> Sample:
    """One record of the recorded H100 trace as a Sample."""
    used = record.get("mem_used")
    return Sample(
        ts=ts,
        gpu_uuid=gpu_uuid,
        util_gpu=record.get("util"),
        util_mem=record.get("mem_util"),
        mem_used_mb=None if used is None else used / _MIB,
        power_w=None if record.get("power_mw") is None else record["power_mw"] / 1000.0,
        temp_gpu=record.get("temp"),
        sm_clock_mhz=record.get("sm_clock"),
    )


class ReplaySource:
    """StreamingSource over a JSONL file; `speed` 1.0 = recorded pace, 0 = as fast as possible."""

    name = "replay"

    def __init__(
        self,
        path: str | Path,
        *,
        node: str,
        gpu_uuid: str = "GPU-replay-0",
        speed: float = 1.0,
        loop: bool = False,
        rebase: bool = True,
        clock: Callable[[], float] = time.time,
        health: SourceHealth | None = None,
    ) -> None:
        self.path = Path(path)
        self.node = node
        self.gpu_uuid = gpu_uuid
        self.speed = speed
        self.loop = loop
        self.rebase = rebase
        self.clock = clock
        self.health = health or SourceHealth("replay")
        self.played = 0
        self._announced = False

    def records(self) -> Iterator[tuple[float, Observations]]:
        """(recorded time, observations) per valid line; bad lines are counted and skipped."""
        try:
            fh = open(self.path, encoding="utf-8")  # noqa: SIM115 (closed by `with` below)
        except OSError as exc:
            self.health.error("open", exc)
            return
        with fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield self._parse(json.loads(line))
                except (ValueError, KeyError, TypeError, ValidationError) as exc:
                    self.health.parse_failure(type(exc).__name__, f"line {lineno}: {line}")

    def _parse(self, rec: dict[str, Any]) -> tuple[float, Observations]:
        kind = rec.pop("type", None)
        if kind is None:
            t = float(rec["t"])
            obs = Observations(samples=[trace_sample(rec, gpu_uuid=self.gpu_uuid, ts=t)])
            if not self._announced:
                # A trace names no GPU: say which one these samples belong to, once.
                self._announced = True
                obs.gpus.append(
                    GpuInfo(
                        uuid=self.gpu_uuid, node=self.node, index=0, name=f"replay {self.path.name}"
                    )
                )
            return t, obs
        if kind == "sample":
            rec.setdefault("gpu_uuid", self.gpu_uuid)
            s = Sample.model_validate(rec)
            return s.ts, Observations(samples=[s])
        if kind == "event":
            rec.setdefault("node", self.node)
            e = Event.model_validate(rec)
            return e.ts, Observations(events=[e])
        if kind == "gpu":
            rec.setdefault("node", self.node)
            return float(rec.pop("ts", 0.0)), Observations(gpus=[GpuInfo.model_validate(rec)])
        raise ValueError(f"unknown record type {kind!r}")

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Emit each record when its (scaled) time comes; until the end, or forever with loop."""
        while not stop.is_set():
            self._play_once(emit, stop)
            if not self.loop:
                return

    def _play_once(self, emit: Emit, stop: threading.Event) -> None:
        start = self.clock()
        first: float | None = None
        for t, obs in self.records():
            if stop.is_set():
                return
            first = t if first is None else first
            due = start + (t - first) / self.speed if self.speed > 0 else None
            if due is not None:
                delay = due - self.clock()
                if delay > 0 and stop.wait(delay):
                    return
            if self.rebase:
                _shift_times(obs, (due if due is not None else self.clock()) - t)
            emit(obs)
            self.played += 1


def _shift_times(obs: Observations, shift: float) -> None:
    for s in obs.samples:
        s.ts += shift
    for e in obs.events:
        e.ts += shift
