"""A daemon thread with start and stop, the shape of the store's background helpers."""

from __future__ import annotations

import threading


class DaemonLoop:
    """Runs `_run` on a daemon thread named `name`; `_run` returns once `_stop` is set."""

    name = "daemon"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for its current round to end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        raise NotImplementedError
