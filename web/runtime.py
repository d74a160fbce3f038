"""Periodic work inside the server (cluster sources, correlator) on one APScheduler.

With several replicas, only the leader will run these (deployment issue); today there is one.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.orm import Session, sessionmaker

from collector.base import Observations, Source, StreamingSource
from timeline import service
from timeline.db import unit_of_work
from timeline.models import Batch

log = logging.getLogger(__name__)


@dataclass
class ScheduledSource:
    """A cluster-side source polled by the server, appended to the store as a batch."""

    source: Source
    interval_s: float


def store_observations(factory: sessionmaker[Session], *, obs: Observations, name: str) -> int:
    """Store what a server-side source saw as one batch; returns items stored."""
    if obs.is_empty():
        return 0
    batch = Batch(
        agent=f"server:{name}",
        node=f"server:{name}",
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


class ServerRuntime:
    """Owns the scheduler of the server's periodic jobs; every job is failure-isolated."""

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self.factory = factory
        self.scheduler = BackgroundScheduler(daemon=True)
        self.jobs: dict[str, Callable[[], object]] = {}
        self.streams: list[tuple[StreamingSource, threading.Thread]] = []
        self.threads: list[threading.Thread] = []
        self.healer: Any = None  # the HealerRunner when the healer is on (API wakes it)
        self._stop = threading.Event()

    def add(self, name: str, fn: Callable[[], object], interval_s: float) -> None:
        """Run `fn` every `interval_s` seconds; one run at a time; errors logged, never fatal."""

        def guarded() -> None:
            try:
                fn()
            except Exception:
                log.exception("periodic job %s failed; it runs again next interval", name)

        self.jobs[name] = fn
        self.scheduler.add_job(
            guarded, "interval", seconds=interval_s, id=name, max_instances=1, coalesce=True
        )

    def add_source(self, scheduled: ScheduledSource) -> None:
        """Poll a cluster source on its interval."""
        src = scheduled.source
        self.add(
            f"source:{src.name}",
            lambda: append_observations(self.factory, source=src),
            scheduled.interval_s,
        )

    def add_stream(self, source: StreamingSource) -> None:
        """Run a streaming source (e.g. Kubernetes watches) on its own thread once started."""
        name = source.name

        def emit(obs: Observations) -> None:
            try:
                store_observations(self.factory, obs=obs, name=name)
            except Exception:
                log.exception("storing what %s saw failed; dropped this batch", name)

        def run() -> None:
            try:
                source.run(emit, self._stop)
            except Exception:
                log.exception("streaming source %s stopped on an error", name)

        self.streams.append((source, threading.Thread(target=run, name=name, daemon=True)))

    def add_thread(self, name: str, target: Callable[[threading.Event], None]) -> None:
        """Run `target(stop)` on its own thread once started (a loop that returns on stop)."""

        def run() -> None:
            try:
                target(self._stop)
            except Exception:
                log.exception("background loop %s stopped on an error", name)

        self.threads.append(threading.Thread(target=run, name=name, daemon=True))

    def start(self) -> None:
        """Start the scheduler (if it has jobs), the streaming sources and the loops."""
        if self.jobs:
            self.scheduler.start()
        for _, thread in self.streams:
            thread.start()
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        """Stop the scheduler and the streams, waiting for running work."""
        self._stop.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        for thread in [t for _, t in self.streams] + self.threads:
            if thread.is_alive():  # never started where this process did not lead
                thread.join(timeout=10)
