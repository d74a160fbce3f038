"""The leader's correlator passes in a child process, replaced when its memory has grown.

At 100k GPUs a hang or idle check reads answers of a hundred thousand series. CPython frees
those objects when the check ends, but the small-object arenas they filled stay with the
process while a few live objects hold each one: the leader's RSS climbed 10-15 MB a minute
in issue #12's 20-minute runs, and glibc's malloc_trim cannot reach those arenas (web/heap.py).
Memory that fragments this way goes back to the OS only with its process, so the passes run
in a child (a fresh interpreter, spawned) that the leader replaces once its RSS after a pass
is over `correlator_process_max_rss_mb`: the leader's own memory does not see the checks.

The child holds no state the database does not: the pass reads its cursor and the checks'
times from the store, so a replaced or crashed child loses nothing, and the next pass (in a
new child) goes on from the same cursor.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess

import psutil
from sqlalchemy.orm import Session, sessionmaker

from correlator.models import CorrelationReport
from timeline.settings import Settings

log = logging.getLogger(__name__)

_PASS, _STOP = "pass", "stop"
_JOIN_S = 10.0  # a child asked to stop that has not exited by then is killed


@dataclass
class _Child:
    proc: SpawnProcess
    conn: Connection


def pass_and_trim(factory: sessionmaker[Session], settings: Settings) -> CorrelationReport | None:
    """One correlator pass, then the heap trim when the pass ran a check (and trims are on)."""
    from correlator.jobs import run_correlator
    from web import heap

    report = run_correlator(factory, settings)
    if settings.correlator_trim_heap and report is not None and report.checks_took_s:
        heap.trim()
    return report


def _serve(settings: Settings, conn: Connection) -> None:
    """The child: one correlator pass per request, answered with its report and the RSS."""
    # Ctrl-C reaches the whole process group; the leader decides when this process ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from timeline import db, samples
    from web.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    engine = db.make_engine(settings.database_url, busy_timeout_s=settings.database_busy_timeout_s)
    factory = db.make_sessionmaker(engine)
    samples.use(samples.from_settings(settings))  # the checks read the configured store
    me = psutil.Process()
    try:
        while conn.recv() == _PASS:
            report = pass_and_trim(factory, settings)
            conn.send((report, me.memory_info().rss / 2**20))
    except EOFError:  # the leader is gone: nobody is left to answer
        pass
    finally:
        engine.dispose()


class CorrelatorProcess:
    """Runs correlator passes in a spawned child; a child past `max_rss_mb` is replaced."""

    def __init__(self, settings: Settings, *, max_rss_mb: float, timeout_s: float) -> None:
        self.settings = settings
        self.max_rss_mb = max_rss_mb
        self.timeout_s = timeout_s
        self.started = 0  # children started so far: the first, and one per replacement
        self._ctx = multiprocessing.get_context("spawn")
        self._child: _Child | None = None
        self._lock = threading.Lock()  # one pass at a time, and close() waits for it

    @property
    def pid(self) -> int | None:
        """The running child's pid, if one runs."""
        return None if self._child is None else self._child.proc.pid

    def run_pass(self) -> CorrelationReport | None:
        """One pass in the child; None when it failed, hung or died (logged, child replaced)."""
        with self._lock:
            child = self._child or self._start()
            try:
                child.conn.send(_PASS)
                if not child.conn.poll(self.timeout_s):
                    log.error(
                        "correlator process %d gave no answer in %.0f s; killed, the next "
                        "pass runs in a new one", child.proc.pid, self.timeout_s,
                    )  # fmt: skip
                    self._end(force=True)
                    return None
                report, rss_mb = child.conn.recv()
            except (EOFError, OSError):
                child.proc.join(1.0)
                log.error(
                    "correlator process %d died (exit code %s); the next pass runs in a new one",
                    child.proc.pid, child.proc.exitcode,
                )  # fmt: skip
                self._end(force=True)
                return None
            if rss_mb > self.max_rss_mb:
                log.info(
                    "correlator process %d at %.0f MB after a pass, over %.0f MB: replaced",
                    child.proc.pid, rss_mb, self.max_rss_mb,
                )  # fmt: skip
                self._end(force=False)
            return report if isinstance(report, CorrelationReport) else None

    def close(self) -> None:
        """Stop the child, after the pass it may be running."""
        with self._lock:
            self._end(force=False)

    def _start(self) -> _Child:
        ours, theirs = self._ctx.Pipe()
        # daemon: if the server exits without close(), multiprocessing ends the child too.
        proc = self._ctx.Process(
            target=_serve, args=(self.settings, theirs), name="correlator", daemon=True
        )
        proc.start()
        theirs.close()  # the child's end lives in the child: its exit shows here as EOF
        self.started += 1
        self._child = _Child(proc, ours)
        log.info("correlator process %d started", proc.pid)
        return self._child

    def _end(self, *, force: bool) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if not force:
            with contextlib.suppress(OSError):  # already gone
                child.conn.send(_STOP)
            child.proc.join(_JOIN_S)
        if child.proc.is_alive():
            child.proc.kill()
            child.proc.join(_JOIN_S)
        child.conn.close()
