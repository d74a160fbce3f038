"""One leader among the server processes of a host: it alone runs the periodic work.

An exclusive flock on a file in the data directory. The kernel releases it when the holder
exits, however it exits, so a waiting worker takes over. (Replicas on several hosts will use a
PostgreSQL advisory lock instead; the deployment issue.)
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


class LeaderLock:
    """Waits on its own thread for the lock, then calls `on_elected` once."""

    def __init__(self, path: Path, on_elected: Callable[[], None]) -> None:
        self.path = path
        self.on_elected = on_elected
        self.elected = threading.Event()
        self._stop = threading.Event()
        self._fd: int | None = None
        self._thread = threading.Thread(target=self._run, name="leader-lock", daemon=True)

    def start(self) -> None:
        """Begin waiting for leadership in the background."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._thread.start()

    def _run(self) -> None:
        assert self._fd is not None
        while not self._stop.is_set():
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._stop.wait(1.0)  # polled so that stop() is prompt; takeover within ~1 s
                continue
            log.info("pid %d leads: it runs the sources and the correlator", os.getpid())
            self.elected.set()
            self.on_elected()
            return

    def stop(self) -> None:
        """Stop waiting; release the lock if held."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
