"""Group commit onto VictoriaMetrics: a group's samples are imported before the batch claims take
SQLite's write lock (the whole database), and a reused id with other content still stores none
of it."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.timeline.test_group_commit import _answers, _pending
from timeline import db, queries
from timeline.errors import BatchConflict
from timeline.group_commit import GroupWriter, store_alone
from timeline.models import AppendResult
from timeline.samples_vm import VmSampleStore

pytestmark = pytest.mark.integration


def _probe_lock(path: str) -> str | None:
    """None when another connection can take the write lock now, else SQLite's message."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return None
    except sqlite3.OperationalError as exc:
        return str(exc)
    finally:
        other.close()


def test_a_groups_samples_go_to_victoriametrics_while_the_write_lock_is_free(
    sqlite_factory: sessionmaker[Session], on_vm: VmSampleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(sqlite_factory.kw["bind"].url.database)
    imports: list[tuple[int, str | None]] = []
    real = on_vm.append_many

    def probed(session: Session, **kw: Any) -> int:
        imports.append((sum(len(rows) for _, rows in kw["parts"]), _probe_lock(path)))
        return real(session, **kw)

    monkeypatch.setattr(on_vm, "append_many", probed)
    writer = GroupWriter(sqlite_factory, db.write_lock(sqlite_factory.kw["bind"]))
    group = [_pending(f"n{k}", f"b{k}") for k in range(3)]
    writer.store(group)
    assert [a.samples for a in _answers(group) if isinstance(a, AppendResult)] == [8, 8, 8]
    assert imports == [(24, None)]
    with sqlite_factory() as s:
        assert queries.count_rows(s, table="ingest_batches") == 3
        assert on_vm.latest(s)["GPU-n2-7"]["power_w"] == 307.0


def test_on_victoriametrics_a_replay_is_not_imported_again_and_a_reused_id_stores_nothing(
    sqlite_factory: sessionmaker[Session], on_vm: VmSampleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = GroupWriter(sqlite_factory, db.write_lock(sqlite_factory.kw["bind"]))
    first = [_pending("n1", "old"), _pending("n2", "reused")]
    writer.store(first)
    _answers(first)
    imported: list[int] = []
    real = on_vm.append_many

    def counted(session: Session, **kw: Any) -> int:
        imported.append(sum(len(rows) for _, rows in kw["parts"]))
        return real(session, **kw)

    monkeypatch.setattr(on_vm, "append_many", counted)
    group = [
        _pending("n1", "old"),  # a replay
        _pending("n2", "reused", util=99.0),  # the same id, other content
        _pending("n3", "new"),
    ]
    writer.store(group)
    replay, reused, new = _answers(group)
    assert isinstance(replay, AppendResult) and replay.duplicate
    assert isinstance(reused, BatchConflict)
    assert isinstance(new, AppendResult) and new.samples == 8
    assert imported == [8]  # the new batch's samples only
    with sqlite_factory() as s:
        assert on_vm.latest(s)["GPU-n2-0"]["util_gpu"] == 50.0


def test_a_batch_stored_alone_goes_to_victoriametrics_while_the_write_lock_is_free(
    sqlite_factory: sessionmaker[Session], on_vm: VmSampleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(sqlite_factory.kw["bind"].url.database)
    locks: list[str | None] = []
    real = on_vm.append

    def probed(session: Session, **kw: Any) -> int:
        locks.append(_probe_lock(path))
        return real(session, **kw)

    monkeypatch.setattr(on_vm, "append", probed)
    lock = db.write_lock(sqlite_factory.kw["bind"])
    for _ in range(2):  # the second time, a replay: nothing is written again
        p = _pending("n1", "alone")
        answer = store_alone(sqlite_factory, lock, intake=p.intake, received_ts=p.received_ts)
    assert answer.duplicate and locks == [None]
    with sqlite_factory() as s:
        assert on_vm.latest(s)["GPU-n1-3"]["power_w"] == 303.0
