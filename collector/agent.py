"""The node agent: runs sources, writes everything to the spool first, delivers in batches.

Polled sources run on their intervals under APScheduler (a BackgroundScheduler; one instance per
source at a time, late runs coalesced). Streaming sources each get a thread that is restarted
after a crash. A delivery thread drains the spool. A source error is counted in the agent's
SourceHealth and never stops the agent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler

from collector.base import Observations, Source, StreamingSource
from collector.delivery import Delivery, Outcome
from collector.health import SourceHealth
from collector.spool import Spool

log = logging.getLogger(__name__)


@dataclass
class Polled:
    """A polled source and its interval in seconds."""

    source: Source
    interval_s: float


class Agent:
    """Wires sources -> spool -> delivery; start() returns, stop() shuts down cleanly."""

    def __init__(
        self,
        *,
        spool: Spool,
        delivery: Delivery | None,
        polled: list[Polled] | None = None,
        streaming: list[StreamingSource] | None = None,
        flush_interval_s: float = 2.0,
        auth_retry_s: float = 300.0,
        restart_delay_s: float = 5.0,
        on_stop: list[Callable[[], None]] | None = None,
    ) -> None:
        self.spool = spool
        self.delivery = delivery
        self.polled = polled or []
        self.streaming = streaming or []
        self.flush_interval_s = flush_interval_s
        self.auth_retry_s = auth_retry_s
        self.restart_delay_s = restart_delay_s
        self.health = SourceHealth("agent")
        self.stop_event = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._scheduler = BackgroundScheduler(job_defaults={"coalesce": True, "max_instances": 1})
        self._on_stop = on_stop or []
        self._last_outcome = Outcome.EMPTY
        if delivery is not None:
            delivery.interrupt_on(self.stop_event)

    def emit(self, obs: Observations) -> None:
        """Spool observations (committed before return); never raises."""
        if obs.is_empty():
            return
        try:
            self.spool.put(obs)
        except Exception as exc:  # a full disk must not kill the source thread
            self.health.error("spool put", exc)
            return
        if obs.events:
            self._wake.set()  # events (an Xid) go out now, not at the next flush interval

    def poll(self, source: Source) -> None:
        """Collect one source once and spool the result; errors are counted, not raised."""
        try:
            obs = source.collect()
        except Exception as exc:
            self.health.error(f"{source.name}: collect", exc)
            return
        self.emit(obs)

    def start(self) -> None:
        """Start the scheduler, the streaming threads and the delivery thread."""
        now = datetime.now()
        for i, p in enumerate(self.polled):
            self._scheduler.add_job(
                self.poll,
                "interval",
                args=[p.source],
                seconds=p.interval_s,
                next_run_time=now + timedelta(milliseconds=10 * i),
                id=f"{p.source.name}-{i}",
                misfire_grace_time=max(1, int(p.interval_s)),
            )
        self._scheduler.start()
        for src in self.streaming:
            self._spawn(f"stream-{src.name}", self._run_streaming, src)
        if self.delivery is not None:
            self._spawn("delivery", self._deliver_loop)
        log.info(
            "agent started: %d polled, %d streaming sources; spool %s",
            len(self.polled),
            len(self.streaming),
            self.spool.path,
        )

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop sources, make one last delivery round, close everything."""
        self.stop_event.set()
        self._wake.set()
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
        for t in self._threads:
            t.join(timeout_s)
        for fn in self._on_stop:
            try:
                fn()
            except Exception as exc:
                self.health.error("shutdown hook", exc)
        if self.delivery is not None:
            self.delivery.close()
        self.spool.close()
        log.info("agent stopped")

    def run_forever(self) -> None:
        """start(), then block until stop_event is set (by a signal handler), then stop()."""
        self.start()
        try:
            while not self.stop_event.wait(1.0):
                pass
        finally:
            self.stop()

    def running_threads(self) -> list[str]:
        """Names of the agent's threads still alive (empty after a clean stop)."""
        return [t.name for t in self._threads if t.is_alive()]

    def _spawn(self, name: str, target: Callable[..., None], *args: object) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _run_streaming(self, src: StreamingSource) -> None:
        while not self.stop_event.is_set():
            try:
                src.run(self.emit, self.stop_event)
            except Exception as exc:
                self.health.error(f"{src.name}: crashed", exc)
            if not self.stop_event.is_set():
                # A streaming source that returns early (or crashed) is started again.
                self.stop_event.wait(self.restart_delay_s)

    def _deliver_loop(self) -> None:
        assert self.delivery is not None
        while not self.stop_event.is_set():
            self._wake.clear()
            try:
                outcome = self.delivery.drain(stop=self.stop_event)
            except Exception as exc:
                self.health.error("delivery", exc)
                outcome = Outcome.RETRY_LATER
            self._last_outcome = outcome
            wait = self.auth_retry_s if outcome == Outcome.AUTH_FAILED else self.flush_interval_s
            self._wake.wait(wait)
        # One last round so a clean shutdown leaves as little as possible spooled.
        try:
            self._final_flush()
        except Exception as exc:
            self.health.error("final delivery", exc)

    def _final_flush(self, budget_s: float = 3.0) -> None:
        assert self.delivery is not None
        if self._last_outcome in (Outcome.RETRY_LATER, Outcome.AUTH_FAILED):
            return  # the server is not taking batches; they stay spooled for the next start
        # A fresh retrying without the (now set) stop event: one quick attempt per batch.
        self.delivery.interrupt_on(threading.Event())
        deadline = time.monotonic() + budget_s
        while time.monotonic() < deadline:
            if self.delivery.deliver_once() not in (Outcome.DELIVERED, Outcome.SPLIT):
                return
