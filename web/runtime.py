"""Periodic work inside the server (cluster sources, correlator) on one APScheduler.

Every replica serves requests; only the leader (web.leader) runs this work.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.orm import Session, sessionmaker

from collector.base import Observations, Source, StreamingSource
from timeline import lease, service
from timeline.db import unit_of_work
from timeline.errors import StaleLeader
from timeline.models import Batch

log = logging.getLogger(__name__)


class _SkipsAreExpected(logging.Filter):
    """Drops APScheduler's warning that a run was skipped because the last still runs.

    Every periodic job runs with max_instances=1 on purpose, and the correlator's is due every
    0.25 s: a pass that takes 10 s at 100k GPUs made 40 such warnings (2,483 in a 10-minute
    bench scale run), drowning the ones that matter.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in record.getMessage()


logging.getLogger("apscheduler.scheduler").addFilter(_SkipsAreExpected())


class NodeSource(Protocol):
    """A server-side source of several nodes' GPU telemetry (e.g. a site's Prometheus)."""

    name: str

    def collect_by_node(self) -> dict[str, Observations]:
        """Read once; node -> what its GPUs reported."""
        ...


@dataclass
class ScheduledSource:
    """A cluster-side source polled by the server, appended to the store as a batch."""

    source: Source
    interval_s: float


def store_observations(
    factory: sessionmaker[Session], *, obs: Observations, name: str, node: str | None = None
) -> int:
    """Store what a server-side source saw as one batch; returns items stored. Samples are
    stored under `node` (a source that reads a node's GPU telemetry names it)."""
    if obs.is_empty():
        return 0
    batch = Batch(
        agent=f"server:{name}",
        node=node or f"server:{name}",
        batch_id=uuid.uuid4().hex,
        gpus=obs.gpus,
        samples=obs.samples,
        events=obs.events,
        jobs=obs.jobs,
        allocations=obs.allocations,
        nodes=obs.nodes,
        job_patches=obs.job_patches,
    )
    with unit_of_work(factory) as session:
        service.append_batch(session, batch=batch)
    return obs.size()


def append_observations(factory: sessionmaker[Session], *, source: Source) -> int:
    """Collect once from a polled source and store the result."""
    return store_observations(factory, obs=source.collect(), name=source.name)


def append_by_node(factory: sessionmaker[Session], *, source: NodeSource) -> int:
    """Collect once from a source of many nodes' telemetry; one batch per node."""
    parts = source.collect_by_node()
    return sum(
        store_observations(factory, obs=obs, name=source.name, node=node)
        for node, obs in parts.items()
    )


class ServerRuntime:
    """Owns the server's periodic jobs and streams; they run only while this process leads.

    The leader election (web.leader) calls start_leading(epoch) and stop_leading(). Jobs whose
    writes must come from the leader only call `fence(session)` inside their transaction.
    """

    def __init__(self, factory: sessionmaker[Session], *, lease_name: str = "leader") -> None:
        self.factory = factory
        self.lease_name = lease_name
        self.jobs: dict[str, Callable[[], object]] = {}
        self.streams: list[StreamingSource] = []
        self.epoch: int | None = None  # the term this process leads, or led last
        self._intervals: dict[str, float] = {}
        self._scheduler: BackgroundScheduler | None = None
        self._threads: list[threading.Thread] = []
        # Loops that run on their own thread while leading (the healer): name -> target(stop).
        self.loops: dict[str, Callable[[threading.Event], None]] = {}
        self.healer: Any = None  # the HealerRunner when the healer is on (the API wakes it)
        # Called when a term ends, after the jobs have stopped (the correlator's child process).
        self.closers: list[Callable[[], None]] = []
        self._stop = threading.Event()

    def add(self, name: str, fn: Callable[[], object], interval_s: float) -> None:
        """Run `fn` every `interval_s` seconds while leading; one run at a time; errors logged."""
        self.jobs[name] = fn
        self._intervals[name] = interval_s

    def add_source(self, scheduled: ScheduledSource) -> None:
        """Poll a cluster source on its interval."""
        src = scheduled.source
        self.add(
            f"source:{src.name}",
            lambda: append_observations(self.factory, source=src),
            scheduled.interval_s,
        )

    def add_stream(self, source: StreamingSource) -> None:
        """Run a streaming source (e.g. Kubernetes watches) on its own thread while leading."""
        self.streams.append(source)

    def fence(self, session: Session) -> None:
        """Raise StaleLeader unless this process's epoch still holds the lease (see lease.fence)."""
        if self.epoch is None:
            raise StaleLeader("this process has not led since it started")
        lease.fence(session, name=self.lease_name, epoch=self.epoch)

    def start_leading(self, epoch: int) -> None:
        """Begin a term: start the scheduler (if it has jobs) and the streaming sources."""
        self.epoch = epoch
        self._stop = threading.Event()
        if self.jobs:
            self._scheduler = BackgroundScheduler(daemon=True)
            for name, fn in self.jobs.items():
                self._scheduler.add_job(
                    _guarded(name, fn),
                    "interval",
                    seconds=self._intervals[name],
                    id=name,
                    max_instances=1,
                    coalesce=True,
                )
            self._scheduler.start()
        self._threads = [self._stream_thread(src, self._stop) for src in self.streams]
        self._threads += [
            self._loop_thread(name, target, self._stop) for name, target in self.loops.items()
        ]
        for thread in self._threads:
            thread.start()

    def _stream_thread(self, source: StreamingSource, stop: threading.Event) -> threading.Thread:
        name = source.name

        def emit(obs: Observations) -> None:
            try:
                store_observations(self.factory, obs=obs, name=name)
            except Exception:
                log.exception("storing what %s saw failed; dropped this batch", name)

        def run() -> None:
            try:
                source.run(emit, stop)
            except Exception:
                log.exception("streaming source %s stopped on an error", name)

        return threading.Thread(target=run, name=name, daemon=True)

    def add_thread(self, name: str, target: Callable[[threading.Event], None]) -> None:
        """Run `target(stop)` on its own thread while leading (a loop that returns on stop)."""
        self.loops[name] = target

    @staticmethod
    def _loop_thread(
        name: str, target: Callable[[threading.Event], None], stop: threading.Event
    ) -> threading.Thread:
        def run() -> None:
            try:
                target(stop)
            except Exception:
                log.exception("background loop %s stopped on an error", name)

        return threading.Thread(target=run, name=name, daemon=True)

    def stop_leading(self) -> None:
        """End the term: stop the scheduler and the streams, waiting for running work.

        `epoch` keeps the old term, so work still finishing is refused by the fence.
        """
        self._stop.set()
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=True)
        self._scheduler = None
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []
        for close in self.closers:
            try:
                close()
            except Exception:
                log.exception("closing %r at the end of a term failed", close)


def _guarded(name: str, fn: Callable[[], object]) -> Callable[[], None]:
    """`fn` with its errors logged, never raised into the scheduler."""

    def guarded() -> None:
        try:
            fn()
        except StaleLeader as exc:
            log.warning("periodic job %s refused: %s", name, exc)
        except Exception:
            log.exception("periodic job %s failed; it runs again next interval", name)

    return guarded
