"""The agent: sources -> spool -> delivery; a failing source is counted and the rest go on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pynvml

from collector.agent import Agent, Polled
from collector.base import Emit, Observations
from collector.delivery import Delivery
from collector.fakenvml import FakeNvml
from collector.nvml import NvmlSource
from collector.nvml_events import NvmlEventSource
from collector.spool import Spool
from timeline.models import Batch, EventKind


class Broken:
    """A polled source whose every read fails."""

    name = "broken"

    def collect(self) -> Observations:
        raise RuntimeError("device went away")


class CrashOnce:
    """A streaming source that crashes the first time and emits an event the second."""

    name = "crash-once"

    def __init__(self) -> None:
        self.runs = 0

    def run(self, emit: Emit, stop: threading.Event) -> None:
        self.runs += 1
        if self.runs == 1:
            raise RuntimeError("boom")
        fake = FakeNvml()
        fake.nvmlInit()
        emit(Observations(events=[NvmlEventSource(fake, node="n1").to_event(_xid(fake))]))
        stop.wait()


def _xid(fake: FakeNvml) -> object:
    es = fake.nvmlEventSetCreate()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    fake.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, es)
    fake.queue_recorded_xids(0)
    return fake.nvmlEventSetWait(es, 100)


def _until(cond: Callable[[], bool], limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_agent_spools_delivers_and_survives_failing_sources(tmp_path: Path) -> None:
    received: list[Batch] = []

    def server(request: httpx.Request) -> httpx.Response:
        batch = Batch.model_validate_json(request.content)
        received.append(batch)
        return httpx.Response(200, json={"batch_id": batch.batch_id, "duplicate": False})

    spool = Spool(tmp_path / "spool.db")
    delivery = Delivery(
        spool=spool,
        server_url="http://fleet.test",
        token="t",
        agent="a",
        node="n1",
        client=httpx.Client(transport=httpx.MockTransport(server)),
    )
    nvml = NvmlSource(FakeNvml(gpus=2), node="n1")
    crash = CrashOnce()
    agent = Agent(
        spool=spool,
        delivery=delivery,
        polled=[Polled(nvml, 0.05), Polled(Broken(), 0.05)],
        streaming=[crash],
        flush_interval_s=0.05,
        restart_delay_s=0.05,
    )
    agent.start()
    try:
        _until(lambda: sum(len(b.samples) for b in received) >= 6)
        _until(lambda: any(e.kind == EventKind.XID for b in received for e in b.events))
    finally:
        agent.stop()
    assert agent.health.errors["broken: collect"] >= 2  # counted, every time, never raised
    assert agent.health.errors["crash-once: crashed"] == 1 and crash.runs == 2
    assert received[0].gpus and {g.index for g in received[0].gpus} == {0, 1}
    ids = [b.batch_id for b in received]
    assert len(ids) == len(set(ids))


def test_stop_with_the_server_down_returns_promptly_and_keeps_the_spool(tmp_path: Path) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    spool_path = tmp_path / "spool.db"
    spool = Spool(spool_path)
    delivery = Delivery(
        spool=spool,
        server_url="http://fleet.test",
        token="t",
        agent="a",
        node="n1",
        client=httpx.Client(transport=httpx.MockTransport(down)),
        backoff_initial_s=30.0,  # a backoff sleep the stop must interrupt
    )
    agent = Agent(
        spool=spool,
        delivery=delivery,
        polled=[Polled(NvmlSource(FakeNvml(), node="n1"), 0.05)],
        flush_interval_s=0.05,
    )
    agent.start()
    _until(lambda: delivery.stats.transient_failures >= 1)
    agent.stop(timeout_s=10.0)
    assert agent.running_threads() == []  # the 30 s backoff sleep was interrupted
    reopened = Spool(spool_path)
    counters = reopened.counters()
    assert reopened.pending() == counters["produced_samples"] + counters["produced_gpus"] >= 2


def test_an_event_is_delivered_without_waiting_for_the_flush_interval(tmp_path: Path) -> None:
    received: list[Batch] = []
    first_round = threading.Event()

    def server(request: httpx.Request) -> httpx.Response:
        batch = Batch.model_validate_json(request.content)
        received.append(batch)
        return httpx.Response(200, json={"batch_id": batch.batch_id, "duplicate": False})

    class LateXid:
        name = "late-xid"

        def run(self, emit: Emit, stop: threading.Event) -> None:
            first_round.wait()
            fake = FakeNvml()
            fake.nvmlInit()
            emit(Observations(events=[NvmlEventSource(fake, node="n1").to_event(_xid(fake))]))
            stop.wait()

    spool = Spool(tmp_path / "spool.db")
    delivery = Delivery(
        spool=spool,
        server_url="http://fleet.test",
        token="t",
        agent="a",
        node="n1",
        client=httpx.Client(transport=httpx.MockTransport(server)),
    )
    agent = Agent(spool=spool, delivery=delivery, streaming=[LateXid()], flush_interval_s=3600)
    agent.start()
    try:
        _until(lambda: agent.running_threads() != [])
        first_round.set()  # the delivery loop is now asleep for an hour unless woken
        _until(lambda: any(b.events for b in received))
    finally:
        agent.stop()
    assert received[0].events[0].code == 31
