"""Group commit: on SQLite, writes that queued behind one transaction share the next one.

SQLite takes one writer at a time, and most of a 1,000-sample batch's commit is writing out the
index pages it dirtied (one per GPU), the same pages the next batch dirties again. The writes
waiting while one transaction runs go together in the next: each in its own savepoint, so one
that fails rolls back alone and gets its own error, and each caller is answered only after the
commit that holds its write (a failed commit fails every write of the group; none is stored).
PostgreSQL takes concurrent writers, so there each write keeps its own transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from timeline.db import WriteLock, driver_connection, unavailable, unit_of_work
from timeline.errors import StoreUnavailable

T = TypeVar("T")


@dataclass(eq=False)
class _Write(Generic[T]):
    work: Callable[[Session], T]
    value: T | None = None
    error: BaseException | None = None
    done: bool = False

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class GroupCommit:
    """Runs `work(session)` in a committed transaction, grouped with concurrent ones on SQLite."""

    def __init__(self, factory: sessionmaker[Session], lock: WriteLock) -> None:
        self._factory = factory
        self._lock = lock
        self._grouped = factory.kw["bind"].dialect.name == "sqlite"
        self._cond = threading.Condition()
        self._queue: list[_Write[Any]] = []
        self._writing = False

    def run(self, work: Callable[[Session], T]) -> T:
        """The value of `work` once its transaction committed; its error if it raised (or if
        the commit failed: then nothing of it is stored)."""
        if not self._grouped:
            with self._lock.hold(), unit_of_work(self._factory) as session:
                return work(session)
        write = _Write(work)
        with self._cond:
            self._queue.append(write)
            while self._writing and not write.done:
                self._cond.wait()
            if write.done:  # another thread's transaction held it
                return write.outcome()
            self._writing = True
            group, self._queue = self._queue, []
        try:
            self._write(group)
        finally:
            with self._cond:
                self._writing = False
                for w in group:
                    w.done = True
                self._cond.notify_all()
        return write.outcome()

    def _write(self, group: list[_Write[Any]]) -> None:
        try:
            with self._lock.hold(), unit_of_work(self._factory) as session:
                # pysqlite begins a transaction only before a data change: begun here, the
                # first savepoint nests inside it instead of starting (and ending) its own.
                # IMMEDIATE: the write lock now (busy timeout applies), so a read before the
                # first write cannot leave a snapshot that another writer makes stale (BUSY).
                raw = driver_connection(session)
                if not raw.in_transaction:
                    raw.execute("BEGIN IMMEDIATE")
                for w in group:
                    try:
                        with session.begin_nested():
                            w.value = w.work(session)
                    except Exception as exc:
                        # SQLite may roll the whole transaction back on a busy, full or I/O
                        # error: then the group fails together, not just this write.
                        busy = _unavailable(exc)
                        if busy is not None:
                            raise busy from exc
                        if not raw.in_transaction:
                            raise
                        w.error = exc  # a refused write (409, 403...): rolled back alone
        except Exception as exc:  # the lock, the BEGIN or the commit: none of them is stored
            for w in group:
                w.value, w.error = None, exc


def _unavailable(exc: BaseException) -> StoreUnavailable | None:
    """StoreUnavailable when `exc` or what it arose from (a full database whose transaction
    SQLite rolled back makes the savepoint's rollback fail too) means "retry later"."""
    seen: BaseException | None = exc
    while seen is not None:
        busy = unavailable(seen)
        if busy is not None:
            return busy
        seen = seen.__cause__ or seen.__context__
    return None
