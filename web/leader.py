"""One leader among every server process sharing a database, on one host or many.

Each process runs a LeaseElector: on a timer it takes or renews the lease row (timeline.lease)
in a short transaction of its own. The holder runs the periodic work; the others keep trying and
take over when the lease expires (holder killed, paused, cut off from the database) or is
released (a clean shutdown). A leader steps down by itself as soon as it cannot be sure it still
holds the lease: the store refused the renewal, or its own deadline passed without one (the
database was unreachable, or this process was paused). Writes that must come from the leader
only are fenced with the epoch anyway, so a leader that has not noticed yet writes nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from timeline import lease
from timeline.db import unit_of_work

log = logging.getLogger(__name__)


def holder_id() -> str:
    """A name unique to this process on this host: `host:pid:random`."""
    return f"{socket.gethostname()[:200]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LeaseElector:
    """Takes and renews the lease on its own thread; calls `on_elected(epoch)` / `on_deposed()`."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        on_elected: Callable[[int], None],
        on_deposed: Callable[[], None],
        holder: str | None = None,
        name: str = "leader",
        lease_s: float = 15.0,
        renew_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < renew_s < lease_s:
            raise ValueError(f"renew_s ({renew_s}) must be positive and below lease_s ({lease_s})")
        self.factory = factory
        self.on_elected, self.on_deposed = on_elected, on_deposed
        self.holder = holder or holder_id()
        self.name, self.lease_s, self.renew_s, self.clock = name, lease_s, renew_s, clock
        self.epoch: int | None = None  # set while this process leads
        self.elected = threading.Event()  # set once this process has led at least once
        self._deadline = 0.0  # local clock: the latest moment the lease is surely still ours
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-lease", daemon=True)

    @property
    def leading(self) -> bool:
        """Whether this process believes it leads now."""
        return self.epoch is not None

    def start(self) -> None:
        """Begin taking part in the election in the background (the first round runs at once)."""
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # starting or stopping the work failed: the election goes on
                log.exception("lease %r: a round of the election failed", self.name)
            wait = self.renew_s
            if self.epoch is not None:  # wake at the deadline too, to step down on time
                wait = min(wait, max(0.0, self._deadline - self.clock()))
            self._stop.wait(wait)

    def tick(self) -> None:
        """One round: step down if the deadline passed, then take or renew the lease."""
        if self.epoch is not None and self.clock() >= self._deadline:
            self._step_down("its lease ran out before it could renew it")
        started = self.clock()
        try:
            with unit_of_work(self.factory) as session:
                got = lease.acquire(session, name=self.name, holder=self.holder, ttl_s=self.lease_s)
        except Exception as exc:  # the store is down or locked: try again next round
            log.warning("lease %r: the store did not answer (%r)", self.name, exc)
            return
        if got is None:
            if self.epoch is not None:
                self._step_down("another replica holds the lease")
            return
        if self.epoch is not None and got.epoch != self.epoch:
            self._step_down(f"its term ended (epoch {self.epoch}, now {got.epoch})")
        self._deadline = started + self.lease_s  # the store's expiry is no earlier than this
        if self.epoch is None:
            self.epoch = got.epoch
            self.elected.set()
            log.info("%s leads (lease epoch %d): it runs the periodic work", self.holder, got.epoch)
            self.on_elected(got.epoch)

    def _step_down(self, why: str) -> None:
        log.warning("%s steps down from epoch %s: %s", self.holder, self.epoch, why)
        self.epoch = None
        self.on_deposed()

    def stop(self) -> None:
        """Leave the election; a leader stops its work first, then releases the lease."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        epoch = self.epoch
        if epoch is None:
            return
        self._step_down("the server is stopping")
        try:
            with unit_of_work(self.factory) as session:
                lease.release(session, name=self.name, holder=self.holder, epoch=epoch)
        except Exception:  # the lease then simply expires
            log.exception("lease %r: could not release it; it expires by itself", self.name)
