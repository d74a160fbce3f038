"""Staged samples on SQLite: ingest appends to samples_staged, a bulk move files them in samples.

Inserted straight into `samples`, a 1,000-GPU batch dirtied one leaf page of the (gpu_id, ts_ms)
index per GPU, each written whole to the WAL at commit (2.5 MB a batch; in process its insert
took 4.6 ms and its commit 4.6 ms of a 22 ms batch, measured). `samples_staged` has the same
key and no second index: a batch appends to a few pages at its end. A move (one transaction:
insert into `samples`, delete from the stage) then writes each GPU's index leaf once for all
its staged samples.

What a reader sees does not change: every raw read reads both tables (timeline.samples_read),
a sample already in `samples` is not staged again (the first of a GPU's samples in one
millisecond still wins), and rollups and retention move the stage first. A crash loses
nothing a commit acknowledged: staged rows are as durable as any row. PostgreSQL never stages
(its COPY into day partitions does not have this cost); its samples_staged stays empty.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from sqlalchemy import Engine, Table, text
from sqlalchemy.orm import Session, sessionmaker

from timeline import tables as t
from timeline.daemon import DaemonLoop
from timeline.db import WriteLock, unit_of_work

log = logging.getLogger(__name__)

STAGED = "samples_staged"
# A move writes each staged GPU's index leaf once: the more samples per GPU it carries, the
# fewer pages per sample. A move of 20,000 rows holds the write lock 45-57 ms (median, up to
# ~120 ms; measured in process): more rows a move cost as much per row and stall longer.
MOVE_ROWS = 20_000
MAX_WAIT_S = 5.0  # a quiet stage still moves this often, so it stays small
POLL_S = 0.1
_COLS = ", ".join(f'"{c.name}"' for c in t.samples_staged.c)


def staged(session: Session) -> bool:
    """Whether new samples on this session's database go through the stage (SQLite)."""
    return bool(session.get_bind().dialect.name == "sqlite")


def raw_tables(session: Session) -> list[Table]:
    """The tables holding raw samples on this database: `samples`, and the stage on SQLite."""
    return [t.samples, t.samples_staged] if staged(session) else [t.samples]


def insert_statement(columns: Sequence[str]) -> str:
    """The SQLite statement staging one row of `columns` (gpu_id and ts_ms first), unless the
    GPU's sample of that millisecond is already in `samples` (the first one wins)."""
    cols = ", ".join(f'"{c}"' for c in columns)
    holes = ", ".join(f"?{i}" for i in range(1, len(columns) + 1))
    return (
        f"INSERT OR IGNORE INTO {STAGED} ({cols}) SELECT {holes} "
        "WHERE NOT EXISTS (SELECT 1 FROM samples WHERE ts_ms = ?2 AND gpu_id = ?1)"
    )


def move(session: Session) -> int:
    """Move every staged row into `samples`, in the caller's transaction; returns how many.

    The insert and the delete commit together or not at all: a crash between them loses or
    doubles nothing. Callers hold the write lock (the statements take SQLite's anyway).
    """
    if not staged(session):
        return 0
    session.execute(text(f"INSERT OR IGNORE INTO samples ({_COLS}) SELECT {_COLS} FROM {STAGED}"))
    result = session.execute(text(f"DELETE FROM {STAGED}"))
    return int(getattr(result, "rowcount", 0) or 0)


def waiting(session: Session, *, up_to: int = MOVE_ROWS) -> int:
    """How many rows are staged, counted up to `up_to` (a bounded count)."""
    if not staged(session):
        return 0
    q = text(f"SELECT count(*) FROM (SELECT 1 FROM {STAGED} LIMIT :n)")
    return int(session.execute(q, {"n": up_to}).scalar_one())


class StageMover(DaemonLoop):
    """A daemon thread moving the stage into `samples` once MOVE_ROWS rows wait (or the oldest
    move is MAX_WAIT_S old), under the app's write lock."""

    name = "stage-mover"

    def __init__(
        self,
        factory: sessionmaker[Session],
        lock: WriteLock,
        *,
        move_rows: int = MOVE_ROWS,
        max_wait_s: float = MAX_WAIT_S,
        poll_s: float = POLL_S,
    ) -> None:
        super().__init__()
        self.factory, self.lock = factory, lock
        self.move_rows, self.max_wait_s, self.poll_s = move_rows, max_wait_s, poll_s
        self.moved = 0  # rows moved so far, for tests and debugging

    def step(self, *, force: bool = False) -> int:
        """Move the stage if it is due (or `force`); returns the rows moved."""
        with unit_of_work(self.factory) as session:
            n = waiting(session, up_to=self.move_rows)
        if n == 0 or (n < self.move_rows and not force):
            return 0
        with self.lock.hold(), unit_of_work(self.factory) as session:
            moved = move(session)
        self.moved += moved
        return moved

    def _run(self) -> None:
        last, failing = time.monotonic(), False
        while not self._stop.wait(self.poll_s):
            try:
                due = time.monotonic() - last >= self.max_wait_s
                if self.step(force=due) or due:
                    last = time.monotonic()
                failing = False
            except Exception as exc:  # locked or full: the stage waits; readers still see it
                if not failing:  # once per streak, not ten times a second
                    log.warning("moving staged samples failed: %s", exc)
                failing = True


def for_engine(
    engine: Engine, factory: sessionmaker[Session], lock: WriteLock
) -> StageMover | None:
    """A mover for a SQLite file; None for PostgreSQL (which never stages) or an in-memory
    database (one connection, not to be shared with a thread; its readers still see the stage)."""
    if engine.dialect.name != "sqlite" or engine.url.database in (None, "", ":memory:"):
        return None
    return StageMover(factory, lock)
