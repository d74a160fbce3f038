"""Group commit: agents' sample batches stored several per transaction, each exactly once."""

from __future__ import annotations

import fnmatch
import threading
import time
from concurrent.futures import Future

import orjson
import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from timeline import db, queries, samples
from timeline import tables as t
from timeline.errors import BatchConflict, StoreUnavailable
from timeline.group_commit import GROUP_MAX_SAMPLES, GroupWriter, Pending, groupable
from timeline.intake import take_in
from timeline.models import AppendResult

NOW = float(int(time.time()) - 600)


def _body(node: str, batch_id: str, *, ts: float = NOW, util: float = 50.0) -> bytes:
    rows = [
        {"ts": ts, "gpu_uuid": f"GPU-{node}-{i}", "util_gpu": util, "power_w": 300.0 + i}
        for i in range(8)
    ]
    body = {"agent": "a", "node": node, "batch_id": f"batch-{batch_id}", "samples": rows}
    return orjson.dumps(body)


def _pending(node: str, batch_id: str, **kw: float) -> Pending:
    intake = take_in(_body(node, batch_id, **kw), max_items=50_000)
    assert groupable(intake)
    return Pending.of(intake, received_ts=NOW + 1)


def _writer(engine: Engine, factory: sessionmaker[Session]) -> GroupWriter:
    return GroupWriter(factory, db.write_lock(engine))


def _answers(group: list[Pending]) -> list[AppendResult | BaseException]:
    out: list[AppendResult | BaseException] = []
    for p in group:
        exc = p.future.exception(timeout=30)
        out.append(exc if exc is not None else p.future.result())
    return out


def test_a_group_of_nodes_batches_is_stored_in_one_transaction_each_batch_once(
    engine: Engine, session_factory: sessionmaker[Session], session: Session
) -> None:
    writer = _writer(engine, session_factory)
    group = [_pending(f"n{k}", f"b{k}") for k in range(5)]
    writer.store(group)
    answers = _answers(group)
    assert [(a.duplicate, a.samples) for a in answers if isinstance(a, AppendResult)] == [
        (False, 8)
    ] * 5
    assert (writer.transactions, writer.batches) == (1, 5)
    assert queries.count_rows(session, table="samples") == 40
    assert queries.count_rows(session, table="ingest_batches") == 5
    # each GPU seen for the first time is registered under the node whose batch named it
    owners = dict(session.execute(select(t.gpu_ids.c.uuid, t.gpu_ids.c.node)).all())
    assert owners["GPU-n3-7"] == "n3" and len(owners) == 40
    seen = dict(session.execute(select(t.nodes.c.name, t.nodes.c.last_seen_ts)).all())
    assert seen == {f"n{k}": NOW + 1 for k in range(5)}
    latest = samples.store().latest(session)
    assert latest["GPU-n4-2"]["power_w"] == 302.0


def test_a_replay_in_a_group_is_answered_duplicate_and_a_reused_id_409_the_rest_stored(
    engine: Engine, session_factory: sessionmaker[Session], session: Session
) -> None:
    writer = _writer(engine, session_factory)
    first = [_pending("n1", "old"), _pending("n2", "reused")]
    writer.store(first)
    _answers(first)
    group = [
        _pending("n1", "old"),  # the same body again: a replay
        _pending("n2", "reused", util=99.0),  # the same id, other content
        _pending("n3", "new"),
        _pending("n3", "new"),  # twice in one group: the second is the replay
    ]
    writer.store(group)
    replay, reused, new, again = _answers(group)
    assert isinstance(replay, AppendResult) and replay.duplicate
    assert isinstance(reused, BatchConflict)
    assert isinstance(new, AppendResult) and not new.duplicate and new.samples == 8
    assert isinstance(again, AppendResult) and again.duplicate
    assert queries.count_rows(session, table="samples") == 24
    assert samples.store().latest(session)["GPU-n2-0"]["util_gpu"] == 50.0


def test_a_group_whose_transaction_fails_is_stored_batch_by_batch(
    engine: Engine,
    session_factory: sessionmaker[Session],
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(self: object, session: Session, **kw: object) -> int:
        raise StoreUnavailable("injected: the group's samples write failed", 1)

    # append_many is the group's alone; a batch stored alone takes append
    monkeypatch.setattr(type(samples.store()), "append_many", refuse)
    writer = _writer(engine, session_factory)
    group = [_pending(f"n{k}", f"b{k}") for k in range(3)]
    writer.store(group)
    assert [a.samples for a in _answers(group) if isinstance(a, AppendResult)] == [8, 8, 8]
    assert writer.batches == 0  # nothing committed as a group: the failed one rolled back
    assert queries.count_rows(session, table="samples") == 24
    assert queries.count_rows(session, table="ingest_batches") == 3


def test_batches_submitted_from_many_threads_are_all_stored_once_and_grouped(
    engine: Engine, session_factory: sessionmaker[Session], session: Session
) -> None:
    writer = _writer(engine, session_factory)
    futures: list[Future[AppendResult]] = []
    lock = threading.Lock()

    def agent(n: int) -> None:
        for k in range(40):
            intake = take_in(_body(f"n{n}", f"n{n}-{k}", ts=NOW + k), max_items=50_000)
            f = writer.submit(intake, received_ts=NOW + k)
            with lock:
                futures.append(f)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    writer.stop()
    assert all(not f.result(timeout=30).duplicate for f in futures)
    assert len(futures) == 320
    assert queries.count_rows(session, table="samples") == 320 * 8
    assert queries.count_rows(session, table="ingest_batches") == 320
    assert writer.batches == 320 and writer.transactions <= 320
    with pytest.raises(StoreUnavailable):
        writer.submit(take_in(_body("n0", "late"), max_items=50_000), received_ts=NOW)


def test_only_sample_only_batches_without_rejections_are_groupable() -> None:
    body = orjson.loads(_body("n1", "b1"))
    with_event = body | {
        "events": [{"ts": NOW, "node": "n1", "source": "kmsg", "kind": "xid", "message": "x"}]
    }
    bad_sample = body | {"samples": [*body["samples"], {"ts": NOW, "gpu_uuid": ""}]}
    assert groupable(take_in(orjson.dumps(body), max_items=100))
    assert not groupable(take_in(orjson.dumps(with_event), max_items=100))
    assert not groupable(take_in(orjson.dumps(bad_sample), max_items=100))
    assert not groupable(take_in(orjson.dumps(body | {"samples": []}), max_items=100))
    many = [s | {"ts": NOW - k} for k in range(GROUP_MAX_SAMPLES // 8 + 1) for s in body["samples"]]
    assert not groupable(take_in(orjson.dumps(body | {"samples": many}), max_items=50_000))


def _bound(node: str, batch_id: str, uuids: list[str], glob: str) -> Pending:
    rows = [{"ts": NOW, "gpu_uuid": u, "util_gpu": 1.0} for u in uuids]
    body = {"agent": "a", "node": node, "batch_id": f"batch-{batch_id}", "samples": rows}
    intake = take_in(orjson.dumps(body), max_items=50_000)
    return Pending.of(
        intake, received_ts=NOW + 1, may_write_node=lambda n: fnmatch.fnmatchcase(n, glob)
    )


def test_a_node_bound_batch_naming_another_nodes_gpu_is_stored_alone_without_that_gpu(
    engine: Engine, session_factory: sessionmaker[Session], session: Session
) -> None:
    writer = _writer(engine, session_factory)
    writer.store([_pending("n1", "owner")])  # GPU-n1-0..7 now belong to n1
    own = _bound("n2", "own", ["GPU-n2-a", "GPU-n2-b"], "n2")
    thief = _bound("n3", "thief", ["GPU-n3-a", "GPU-n1-0"], "n3")
    # a GPU new to the store, named first by n4's batch in this group: n5 may not take it
    first = _bound("n4", "first", ["GPU-new"], "n4")
    second = _bound("n5", "second", ["GPU-new", "GPU-n5-a"], "n5")
    group = [own, thief, first, second]
    writer.store(group)
    a_own, a_thief, a_first, a_second = _answers(group)
    assert isinstance(a_own, AppendResult) and a_own.samples == 2 and not a_own.rejected
    assert isinstance(a_first, AppendResult) and a_first.samples == 1
    for answer, index, owner in ((a_thief, 1, "n1"), (a_second, 0, "n4")):
        assert isinstance(answer, AppendResult) and answer.samples == 1
        (refused,) = answer.rejected
        assert (refused.kind, refused.index, refused.status) == ("samples", index, 403)
        assert refused.errors[0].field == f"samples.{index}.gpu_uuid"
        assert repr(owner) in refused.errors[0].error
    assert (writer.transactions, writer.batches) == (2, 3)  # n1's, then own and first together
    owners = dict(session.execute(select(t.gpu_ids.c.uuid, t.gpu_ids.c.node)).all())
    assert owners["GPU-new"] == "n4" and owners["GPU-n1-0"] == "n1"
    latest = samples.store().latest(session)
    assert latest["GPU-n1-0"]["util_gpu"] == 50.0  # the thief's sample was not stored


def test_a_queued_batch_cannot_be_cancelled_so_the_writer_always_answers_it(
    engine: Engine, session_factory: sessionmaker[Session], session: Session
) -> None:
    writer = _writer(engine, session_factory)
    future = writer.submit(take_in(_body("n1", "gone"), max_items=50_000), received_ts=NOW)
    assert not future.cancel()  # as asyncio.wrap_future tries when the request is cancelled
    assert future.result(timeout=30).samples == 8
    later = writer.submit(take_in(_body("n2", "later"), max_items=50_000), received_ts=NOW)
    assert later.result(timeout=30).samples == 8  # the writer thread lives on
    writer.stop()
    assert queries.count_rows(session, table="ingest_batches") == 2
