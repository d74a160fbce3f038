"""Test helpers for the Kubernetes source: a sink for emits, a poll-until, a source factory."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from collector.base import Observations
from collector.kubernetes import KubernetesSource, make_api_client
from tests.collector.kubernetes.fakeapi import FakeKubeAPI
from timeline.models import Event, EventKind, Job


class Sink:
    """Collects what a streaming source emits (thread-safe)."""

    def __init__(self) -> None:
        self.batches: list[Observations] = []
        self._lock = threading.Lock()

    def __call__(self, obs: Observations) -> None:
        with self._lock:
            self.batches.append(obs)

    def events(self, kind: EventKind | None = None) -> list[Event]:
        """Every emitted event, optionally of one kind."""
        with self._lock:
            return [e for b in self.batches for e in b.events if kind is None or e.kind == kind]

    def jobs(self, job_id: str) -> list[Job]:
        """Every emitted observation of one job, oldest first."""
        with self._lock:
            return [j for b in self.batches for j in b.jobs if j.job_id == job_id]


def wait_for(pred: Callable[[], object], what: str, timeout: float = 15.0) -> None:
    """Poll until pred() is truthy; fail the test (not a timing assertion) if it never is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


def make_source(fake: FakeKubeAPI, token: str = "test-token") -> KubernetesSource:
    """A source against the fake, with short waits so recovery happens quickly in tests."""
    now = [1_800_000_000.0]
    return KubernetesSource(
        make_api_client(fake.url, token),
        watch_timeout_s=30,
        request_timeout_s=5,
        backoff_initial_s=0.05,
        backoff_max_s=0.4,
        clock=lambda: now[0],
    )
