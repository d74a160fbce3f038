"""Staged samples (SQLite): readers see them as before, the move is one transaction, the first
sample of a GPU's millisecond still wins, rollups and retention take staged rows in."""

from __future__ import annotations

import re
import sqlite3
import time
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from timeline import db, queries, rollups, samples, samples_stage
from timeline import tables as t
from timeline.models import SampleRow

NOW = float(int(time.time()) - 1800)  # whole seconds: ms times are exact


ON_SQLITE = pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)


def _rows(n_gpus: int, n_times: int, t0: float = NOW) -> list[SampleRow]:
    return [
        SampleRow(t0 + k * 10.0, f"GPU-{g}", util_gpu=float(10 * g + k), power_w=100.0 + k)
        for k in range(n_times)
        for g in range(n_gpus)
    ]


def _append(factory: sessionmaker[Session], rows: list[SampleRow], node: str = "n1") -> None:
    with db.unit_of_work(factory) as s:
        samples.store().append(s, node=node, samples=rows)


def _count(session: Session, table: Any) -> int:
    return int(session.execute(select(func.count()).select_from(table)).scalar_one())


def _reads(session: Session) -> tuple[Any, ...]:
    """What every raw-sample reader answers over the stored window."""
    store, uuids = samples.store(), ["GPU-0", "GPU-1", "GPU-2"]
    since, until = NOW - 60, NOW + 600
    return (
        store.window_stats(
            session, uuids=uuids, since=since, until=until, fields=["util_gpu", "power_w"]
        ),
        store.last_above(
            session, uuids=uuids, field="util_gpu", threshold=5.0, since=since, until=until
        ),
        store.series(
            session, uuids=uuids, since=since, until=until, bucket_s=60, fields=["util_gpu"]
        ),
        sorted(store.node_utilization(session, since=since, until=until, bucket_s=60)),
        queries.count_rows(session, table="samples"),
    )


def test_readers_answer_the_same_for_staged_samples_as_for_moved_ones(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _append(session_factory, _rows(3, 20))
    before = _reads(session)
    session.rollback()
    if samples_stage.staged(session):
        assert (_count(session, t.samples), _count(session, t.samples_staged)) == (0, 60)
    with db.unit_of_work(session_factory) as s:
        samples_stage.move(s)
    assert (_count(session, t.samples), _count(session, t.samples_staged)) == (60, 0)
    assert _reads(session) == before
    assert before[-1] == 60 and before[0]["GPU-2"].count == 20


def test_readers_see_half_staged_half_moved_samples_as_one_history(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    rows = _rows(3, 20)
    _append(session_factory, rows)
    whole = _reads(session)
    session.rollback()
    with db.unit_of_work(session_factory) as s:  # start over: half filed, half staged
        s.execute(t.samples.delete())
        s.execute(t.samples_staged.delete())
    _append(session_factory, rows[:30])
    with db.unit_of_work(session_factory) as s:
        samples_stage.move(s)
    _append(session_factory, rows[30:])
    assert _reads(session) == whole


@ON_SQLITE  # PostgreSQL never stages
def test_a_move_that_fails_before_its_commit_loses_and_doubles_nothing(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    assert samples_stage.staged(session)
    _append(session_factory, _rows(3, 10))
    with pytest.raises(RuntimeError), db.unit_of_work(session_factory) as s:
        assert samples_stage.move(s) == 30  # inserted into samples and deleted from the stage
        raise RuntimeError("crash before the commit")
    assert (_count(session, t.samples), _count(session, t.samples_staged)) == (0, 30)
    assert queries.count_rows(session, table="samples") == 30


def test_the_first_sample_of_a_gpu_millisecond_wins_across_the_stage_and_samples(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _append(session_factory, [SampleRow(NOW, "GPU-0", util_gpu=1.0)])
    with db.unit_of_work(session_factory) as s:
        samples_stage.move(s)
    _append(session_factory, [SampleRow(NOW, "GPU-0", util_gpu=2.0)])  # filed one: ignored
    _append(session_factory, [SampleRow(NOW + 1, "GPU-0", util_gpu=3.0)])
    _append(session_factory, [SampleRow(NOW + 1, "GPU-0", util_gpu=4.0)])  # staged one: ignored
    with db.unit_of_work(session_factory) as s:
        samples_stage.move(s)
    got = session.execute(select(t.samples.c.util_gpu).order_by(t.samples.c.ts_ms)).scalars()
    assert list(got) == [1.0, 3.0]


def test_rollups_and_retention_take_staged_samples_in(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    old = time.time() - 9 * 86400
    minute = (time.time() // 60 - 30) * 60  # three samples per GPU in one minute
    _append(session_factory, [SampleRow(old, "GPU-0", util_gpu=1.0)])
    _append(session_factory, _rows(2, 3, t0=minute))
    rollups.run_rollups(session_factory)  # the old row's hours
    rollups.run_rollups(session_factory)  # then on over the gap to the recent rows
    session.rollback()
    assert _count(session, t.samples_staged) == 0
    assert _count(session, t.samples_1m) == 1 + 2  # the old minute, then one per recent GPU
    _append(session_factory, [SampleRow(old + 1, "GPU-0", util_gpu=9.0)])  # late and expired
    session.rollback()  # a reader's lock would hold up dropping a partition on PostgreSQL
    rollups.run_retention(session_factory, keep=rollups.Retention(raw_days=7.0))
    session.rollback()
    assert queries.count_rows(session, table="samples") == 6  # both old rows went


@ON_SQLITE  # PostgreSQL never stages
def test_the_mover_files_the_stage_once_enough_rows_wait_or_when_forced(
    session_factory: sessionmaker[Session], session: Session, engine: Any
) -> None:
    assert samples_stage.staged(session)
    mover = samples_stage.StageMover(session_factory, db.write_lock(engine), move_rows=50)
    _append(session_factory, _rows(3, 10))
    assert mover.step() == 0  # 30 rows wait, under the threshold
    _append(session_factory, _rows(3, 10, t0=NOW + 200))
    assert mover.step() == 60
    _append(session_factory, _rows(1, 1, t0=NOW + 400))
    assert mover.step(force=True) == 1
    assert (_count(session, t.samples), _count(session, t.samples_staged)) == (61, 0)


@ON_SQLITE  # PostgreSQL never stages
def test_the_mover_thread_moves_the_stage_in_the_background(
    session_factory: sessionmaker[Session], session: Session, engine: Any
) -> None:
    assert samples_stage.staged(session)
    lock = db.write_lock(engine)
    mover = samples_stage.StageMover(session_factory, lock, move_rows=10, poll_s=0.01)
    mover.start()
    try:
        _append(session_factory, _rows(3, 10))
        deadline = time.monotonic() + 10
        while mover.moved < 30 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        mover.stop()
    assert (_count(session, t.samples), _count(session, t.samples_staged)) == (30, 0)


def test_only_a_sqlite_file_gets_a_mover(engine: Any) -> None:
    factory = db.make_sessionmaker(engine)
    mover = samples_stage.for_engine(engine, factory, db.write_lock(engine))
    assert (mover is not None) == (engine.dialect.name == "sqlite")
    memory = db.make_engine("sqlite://")
    assert samples_stage.for_engine(memory, factory, db.write_lock(memory)) is None


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_revision_0013_keeps_every_sample_up_and_down(
    backend: str, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("pg_database_url") if backend == "postgres" else ""
    with db.scratch_database(backend, pg_url=pg_url, prefix="fm_stage") as url:
        db.upgrade(url, "0012")
        engine = db.make_engine(url)
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO gpu_ids (id, uuid, node) VALUES (1, 'GPU-a', 'n1')"))
            for k in range(5):
                conn.execute(
                    text("INSERT INTO samples (gpu_id, ts_ms, util_gpu) VALUES (1, :ts, :u)"),
                    {"ts": int(NOW * 1000) + k, "u": float(k)},
                )
        db.upgrade(url, "0013")
        with engine.begin() as conn:
            assert conn.execute(text("SELECT count(*) FROM samples")).scalar_one() == 5
            conn.execute(  # a staged sample at the downgrade goes into samples
                text("INSERT INTO samples_staged (gpu_id, ts_ms, util_gpu) VALUES (1, :ts, 9)"),
                {"ts": int(NOW * 1000) + 5},
            )
        db.downgrade(url, "0012")
        with engine.connect() as conn:
            got = conn.execute(text("SELECT util_gpu FROM samples ORDER BY ts_ms")).scalars()
            assert list(got) == [0.0, 1.0, 2.0, 3.0, 4.0, 9.0]
        engine.dispose()


@ON_SQLITE  # PostgreSQL never stages
def test_raw_reads_take_samples_and_the_stage_in_one_statement_one_snapshot(
    session_factory: sessionmaker[Session], session: Session, engine: Any
) -> None:
    # A move commits between statements, never inside one: read apart, a sample moved between
    # the two reads would be missed (or read twice).
    assert samples_stage.staged(session)
    from sqlalchemy import event

    _append(session_factory, _rows(3, 5))
    seen: list[str] = []

    def note(_conn: Any, _cur: Any, statement: str, *_args: Any) -> None:
        if "samples_staged" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    try:
        _reads(session)
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert len(seen) == 5  # window stats, last above, series, node utilization, count_rows
    assert all(re.search(r"FROM samples\b(?!_)", s) for s in seen)


def test_a_read_of_more_gpus_than_sqlite_binds_twice_in_one_statement_still_answers(
    session_factory: sessionmaker[Session], engine: Any, migrated_url: str
) -> None:
    _append(session_factory, _rows(3, 5))
    if engine.dialect.name == "sqlite":  # SQLite's default bound (Debian builds allow more)
        from sqlalchemy import event

        engine = db.make_engine(migrated_url)
        limit = sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER
        event.listen(engine, "connect", lambda conn, _rec: conn.setlimit(limit, 32_766))
    session = db.make_sessionmaker(engine)()
    uuids = [f"GPU-{g}" for g in range(3)] + [f"GPU-none-{i}" for i in range(17_000)]
    store, since, until = samples.store(), NOW - 60, NOW + 600
    stats = store.window_stats(session, uuids=uuids, since=since, until=until, fields=["util_gpu"])
    above = store.last_above(
        session, uuids=uuids, field="util_gpu", threshold=0.0, since=since, until=until
    )
    series = store.series(
        session, uuids=uuids, since=since, until=until, bucket_s=60, fields=["util_gpu"]
    )
    assert set(stats) == set(above) == {"GPU-0", "GPU-1", "GPU-2"}
    assert stats["GPU-2"].count == 5 and sum(len(v) for v in series.values()) >= 3
    session.close()
    if engine.dialect.name == "sqlite":
        engine.dispose()  # this test's own engine
