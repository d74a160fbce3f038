"""Group commit: writes queued behind a transaction share the next one, each rolled back alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from timeline import db, service
from timeline import tables as t
from timeline.errors import BatchConflict, StoreUnavailable
from timeline.group_commit import GroupCommit
from timeline.models import Batch

NOW = 1_800_000_000.0


def _claim(batch_id: str, digest: str = "d") -> Callable[[Session], object]:
    batch = Batch(agent="a", node="n1", batch_id=f"batch-id-{batch_id}")
    return lambda s: service.append_batch(s, batch=batch, digest=digest, received_ts=NOW)


def _stored(factory: sessionmaker[Session]) -> set[str]:
    with factory() as s:
        return set(s.scalars(select(t.ingest_batches.c.batch_id)))


def _wait_for(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_queued_writes_share_one_commit_and_a_refused_one_rolls_back_alone(
    session_factory: sessionmaker[Session],
) -> None:
    gc = GroupCommit(session_factory, db.write_lock(session_factory.kw["bind"]))
    gc.run(_claim("taken", digest="other"))
    commits: list[int] = []

    def committed(_conn: object) -> None:
        commits.append(1)

    engine = session_factory.kw["bind"]
    event.listen(engine, "commit", committed)
    release = threading.Event()

    def first(s: Session) -> object:
        release.wait(10)  # holds the transaction while the others queue behind it
        return _claim("first")(s)

    results: dict[str, object] = {}

    def call(name: str, work: Callable[[Session], object]) -> None:
        try:
            results[name] = gc.run(work)
        except Exception as exc:
            results[name] = exc

    names = {"first": first, "a": _claim("a"), "taken": _claim("taken"), "b": _claim("b")}
    threads = [threading.Thread(target=call, args=(n, w)) for n, w in names.items()]
    grouped = session_factory.kw["bind"].dialect.name == "sqlite"  # PostgreSQL: side by side
    try:
        threads[0].start()
        if grouped:
            _wait_for(lambda: gc._writing)
        for th in threads[1:]:
            th.start()
        if grouped:  # the three wait in the queue for the next transaction
            _wait_for(lambda: len(gc._queue) == 3)
        release.set()
        for th in threads:
            th.join(10)
    finally:
        release.set()
        event.remove(engine, "commit", committed)
    assert isinstance(results["taken"], BatchConflict)  # 409: its id holds other content
    assert not any(isinstance(results[n], Exception) for n in ("first", "a", "b"))
    assert _stored(session_factory) == {
        "batch-id-taken",
        "batch-id-first",
        "batch-id-a",
        "batch-id-b",
    }
    if grouped:
        assert len(commits) == 2  # "first" alone, then a, taken (rolled back) and b together


def test_a_write_that_cannot_get_the_lock_is_a_503_and_stores_nothing(
    session_factory: sessionmaker[Session],
) -> None:
    lock = db.write_lock(session_factory.kw["bind"], timeout_s=0.01)
    if session_factory.kw["bind"].dialect.name != "sqlite":
        pytest.skip("PostgreSQL: no in-process write lock (its writers run side by side)")
    gc = GroupCommit(session_factory, lock)
    with lock.hold(), pytest.raises(StoreUnavailable):  # another write holds the database
        gc.run(_claim("never"))
    assert _stored(session_factory) == set()
    assert gc.run(_claim("later")) is not None  # the writer is free again
    assert _stored(session_factory) == {"batch-id-later"}
