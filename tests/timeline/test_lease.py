"""The leader lease on both backends: one holder, epochs that grow, stale writes refused."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from timeline import lease
from timeline import tables as t
from timeline.db import unit_of_work
from timeline.errors import StaleLeader, StoreUnavailable

Factory = sessionmaker[Session]


def _acquire(factory: Factory, holder: str, ttl_s: float = 30.0) -> lease.Lease | None:
    with unit_of_work(factory) as s:
        return lease.acquire(s, holder=holder, ttl_s=ttl_s)


def _record(session: Session, batch_id: str) -> None:
    """A stand-in for a leader-only write (an action's state change, a notification sent)."""
    values = {"batch_id": batch_id, "agent": "leader", "node": "n", "received_ts": 1.0}
    session.execute(t.ingest_batches.insert().values(**values))


def _stored(factory: Factory) -> list[str]:
    with factory() as s:
        return list(s.execute(select(t.ingest_batches.c.batch_id)).scalars())


def test_first_holder_gets_epoch_1_and_renewing_keeps_it(session_factory: Factory) -> None:
    first = _acquire(session_factory, "a")
    assert first is not None and (first.holder, first.epoch) == ("a", 1)
    time.sleep(0.05)
    again = _acquire(session_factory, "a")
    assert again is not None and again.epoch == 1
    assert again.expires_ts > first.expires_ts and again.acquired_ts == first.acquired_ts


def test_nobody_else_gets_an_unexpired_lease(session_factory: Factory) -> None:
    assert _acquire(session_factory, "a") is not None
    assert _acquire(session_factory, "b") is None
    with session_factory() as s:
        held = lease.current(s)
    assert held is not None and (held.holder, held.epoch) == ("a", 1)


def test_an_expired_lease_changes_hands_and_the_epoch_grows(session_factory: Factory) -> None:
    assert _acquire(session_factory, "a", ttl_s=0.3) is not None
    time.sleep(0.45)
    taken = _acquire(session_factory, "b")
    assert taken is not None and (taken.holder, taken.epoch) == ("b", 2)
    assert _acquire(session_factory, "a") is None


def test_the_same_holder_after_its_lease_lapsed_starts_a_new_epoch(
    session_factory: Factory,
) -> None:
    # A lapse means another replica may have acted in between: work begun under the old epoch
    # must not pass the fence under the new one.
    assert _acquire(session_factory, "a", ttl_s=0.3) is not None
    time.sleep(0.45)
    again = _acquire(session_factory, "a")
    assert again is not None and again.epoch == 2


def test_release_lets_another_replica_take_over_at_once(session_factory: Factory) -> None:
    held = _acquire(session_factory, "a")
    assert held is not None
    with unit_of_work(session_factory) as s:
        assert lease.release(s, holder="a", epoch=held.epoch)
        assert not lease.release(s, holder="b", epoch=held.epoch)  # not b's to release
    taken = _acquire(session_factory, "b")
    assert taken is not None and taken.epoch == 2


def test_fence_passes_for_the_current_epoch_and_the_write_is_stored(
    session_factory: Factory,
) -> None:
    held = _acquire(session_factory, "a")
    assert held is not None
    with unit_of_work(session_factory) as s:
        _record(s, "by-leader")
        lease.fence(s, epoch=held.epoch)
    assert _stored(session_factory) == ["by-leader"]


def test_a_stale_epochs_write_raises_stale_leader_and_is_not_stored(
    session_factory: Factory,
) -> None:
    old = _acquire(session_factory, "a", ttl_s=0.3)
    assert old is not None
    time.sleep(0.45)
    assert _acquire(session_factory, "b") is not None
    with (
        pytest.raises(StaleLeader, match="epoch 1 no longer leads"),
        unit_of_work(session_factory) as s,
    ):
        _record(s, "by-stale-leader")
        lease.fence(s, epoch=old.epoch)
    assert _stored(session_factory) == []


def test_an_expired_lease_fences_even_before_anyone_takes_it(session_factory: Factory) -> None:
    old = _acquire(session_factory, "a", ttl_s=0.3)
    assert old is not None
    time.sleep(0.45)
    with pytest.raises(StaleLeader), unit_of_work(session_factory) as s:
        lease.fence(s, epoch=old.epoch)


def test_fence_without_any_lease_refuses(session_factory: Factory) -> None:
    with pytest.raises(StaleLeader, match="there is no lease"), unit_of_work(session_factory) as s:
        lease.fence(s, epoch=1)


def test_ttl_must_be_positive(session_factory: Factory) -> None:
    with pytest.raises(ValueError), unit_of_work(session_factory) as s:
        lease.acquire(s, holder="a", ttl_s=0)


def test_a_fenced_transaction_commits_before_a_takeover_can(session_factory: Factory) -> None:
    """The lease cannot change hands while a fenced write is in flight: the takeover waits."""
    held = _acquire(session_factory, "a", ttl_s=0.4)
    assert held is not None
    taken: list[tuple[lease.Lease | None, float]] = []
    with unit_of_work(session_factory) as s:
        _record(s, "in-flight")
        lease.fence(s, epoch=held.epoch)
        time.sleep(0.6)  # the lease expires while this transaction is open

        def take_over() -> None:
            taken.append((_acquire(session_factory, "b"), time.monotonic()))

        taker = threading.Thread(target=take_over)
        taker.start()
        time.sleep(0.5)
        assert taken == []  # blocked behind the fenced transaction
        committed = time.monotonic()
    taker.join(timeout=10)
    assert taken and taken[0][0] is not None and taken[0][0].epoch == 2
    assert taken[0][1] >= committed
    assert _stored(session_factory) == ["in-flight"]


@pytest.mark.parametrize("migrated_url", ["postgres"], indirect=True)
def test_postgres_ends_a_fenced_transaction_left_idle_so_the_lease_can_move(
    session_factory: Factory, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader paused (SIGSTOP) inside a fenced transaction must not block takeover forever."""
    monkeypatch.setattr(lease, "IDLE_TX_S", 0.5)
    held = _acquire(session_factory, "a", ttl_s=0.3)
    assert held is not None
    # unit_of_work turns the terminated session into the store's domain error.
    with pytest.raises(StoreUnavailable), unit_of_work(session_factory) as s:
        _record(s, "paused-leader")
        lease.fence(s, epoch=held.epoch)
        time.sleep(1.2)  # "paused": idle in transaction past IDLE_TX_S
        s.execute(select(func.count()).select_from(t.leases))  # the server closed the session
    taken = _acquire(session_factory, "b")
    assert taken is not None and taken.epoch == 2
    assert _stored(session_factory) == []
    engine.dispose()  # drop the pooled connection the server terminated


@pytest.mark.parametrize("migrated_url", ["postgres"], indirect=True)
def test_postgres_sessions_end_any_transaction_left_idle_for_a_minute(engine: Engine) -> None:
    """A paused replica's open transaction (e.g. the correlator's advisory lock) cannot block
    the other replicas for longer than this."""
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar() == "1min"
