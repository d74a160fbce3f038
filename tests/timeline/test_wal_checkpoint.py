"""The background WAL checkpointer: it copies committed pages back, beside the writers."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from timeline import db, wal_checkpoint


def _until(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_committed_frames_are_copied_back_without_a_commit_running_a_checkpoint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")  # only the thread may checkpoint here
    writer.execute("CREATE TABLE t (x BLOB)")
    writer.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) "
        "INSERT INTO t SELECT randomblob(1000) FROM n"
    )
    ck = wal_checkpoint.WalCheckpointer(str(path), interval_s=0.01)
    ck.start()
    try:
        _until(lambda: ck.last is not None)
        busy, frames, copied = ck.last or (1, 0, 0)
        assert busy == 0 and frames > 100 and copied == frames  # every frame copied back
        # ... so the next commit starts the WAL over: the thread then sees a short WAL.
        writer.execute("INSERT INTO t VALUES (x'00')")
        _until(lambda: ck.last is not None and ck.last[1] < frames)
    finally:
        ck.stop()
    assert writer.execute("SELECT count(*) FROM t").fetchone() == (501,)


def test_only_a_sqlite_file_engine_gets_one(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    ck = wal_checkpoint.for_engine(engine)
    assert ck is not None and ck.path == str(tmp_path / "x.db")
    assert wal_checkpoint.for_engine(db.make_engine("sqlite://")) is None
    pg = db.make_engine("postgresql+psycopg://u@127.0.0.1:1/x")
    assert wal_checkpoint.for_engine(pg) is None


def test_stop_ends_the_thread_and_a_second_start_is_a_no_op(tmp_path: Path) -> None:
    ck = wal_checkpoint.WalCheckpointer(str(tmp_path / "y.db"), interval_s=0.01)
    ck.start()
    thread = ck._thread
    ck.start()
    assert ck._thread is thread
    ck.stop()
    assert thread is not None and not thread.is_alive()
