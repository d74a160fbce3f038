"""What every source produces and the two shapes a source can take (polled or streaming)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sized
from dataclasses import dataclass, field
from typing import Protocol

from timeline.models import Allocation, Event, GpuInfo, Job, JobPatch, Node, Sample


@dataclass
class Observations:
    """What one collection produced; the agent spools it, the server appends it as a batch."""

    gpus: list[GpuInfo] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    allocations: list[Allocation] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    job_patches: list[JobPatch] = field(default_factory=list)

    def extend(self, other: Observations) -> None:
        """Append everything in `other` to this one."""
        self.gpus.extend(other.gpus)
        self.samples.extend(other.samples)
        self.events.extend(other.events)
        self.jobs.extend(other.jobs)
        self.allocations.extend(other.allocations)
        self.nodes.extend(other.nodes)
        self.job_patches.extend(other.job_patches)

    def is_empty(self) -> bool:
        """True when nothing was observed."""
        return not (
            self.gpus
            or self.samples
            or self.events
            or self.jobs
            or self.allocations
            or self.nodes
            or self.job_patches
        )

    def size(self) -> int:
        """Number of items of every kind together."""
        parts: tuple[Sized, ...] = (
            self.gpus, self.samples, self.events, self.jobs, self.allocations, self.nodes,
            self.job_patches,
        )  # fmt: skip
        return sum(len(p) for p in parts)


class Source(Protocol):
    """A polled source: the agent or server calls collect() on its interval."""

    name: str

    def collect(self) -> Observations:
        """Read the source once; never raises for bad input (count it in the source's health)."""
        ...


Emit = Callable[[Observations], None]


class StreamingSource(Protocol):
    """A source that blocks waiting for things (NVML event set, /dev/kmsg follow) on its thread."""

    name: str

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Emit observations as they arrive until `stop` is set."""
        ...


def poll_until_stopped(
    stop: threading.Event, *, collect: Callable[[], Observations], emit: Emit, interval_s: float
) -> None:
    """Emit what `collect` returns, every `interval_s`, until `stop` is set (a followed file)."""
    while not stop.is_set():
        obs = collect()
        if not obs.is_empty():
            emit(obs)
        stop.wait(interval_s)
