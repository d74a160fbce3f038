"""SQLite WAL checkpoints from a background thread, so that commits do not run them.

A commit that crosses `wal_autocheckpoint` copies the WAL back into the database and fsyncs
it before it returns: under `bench ingest` such commits took up to ~370 ms (a batch's median is
~60 ms), the p95 stalls. A PASSIVE checkpoint here does the same copying beside the writers
(it takes no write lock and waits on nobody; sqlite3 releases the GIL while it runs). Commits
stay acknowledged as before: a checkpoint only moves committed pages, durability is unchanged.
When a checkpoint has copied every frame, the next commit starts the WAL over. The writers'
wal_autocheckpoint stays as a bound: were this thread to fall behind, a commit checkpoints.
"""

from __future__ import annotations

import logging
import sqlite3

from sqlalchemy import Engine

from timeline.daemon import DaemonLoop

log = logging.getLogger(__name__)

# Often enough that one checkpoint copies a few commits' pages (a 1,000-sample batch wrote
# 2.5 MB of WAL; staged, 0.6 MB with its share of the moves: measured, timeline.samples_stage).
INTERVAL_S = 0.1


class WalCheckpointer(DaemonLoop):
    """A daemon thread running `PRAGMA wal_checkpoint(PASSIVE)` every `interval_s`."""

    name = "wal-checkpoint"

    def __init__(self, path: str, interval_s: float = INTERVAL_S) -> None:
        super().__init__()
        self.path = path
        self.interval_s = interval_s
        self.checkpoints = 0  # completed calls, for tests and debugging
        self.last: tuple[int, int, int] | None = None  # (busy, WAL frames, frames copied back)

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        failing = False
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    self.last = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.checkpoints += 1
                    failing = False
                except sqlite3.Error as exc:  # a full disk, say: the writers' own bound holds
                    if not failing:  # once per streak, not ten times a second
                        log.warning("background WAL checkpoint failed: %s", exc)
                    failing = True
        finally:
            conn.close()


def for_engine(engine: Engine) -> WalCheckpointer | None:
    """A checkpointer for a SQLite file engine; None for PostgreSQL or an in-memory database."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return WalCheckpointer(url.database)
