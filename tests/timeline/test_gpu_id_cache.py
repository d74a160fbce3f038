"""GPU ids are remembered per process only once committed, and then spare the lookup."""

from __future__ import annotations

import time

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from timeline import gpu_id_cache, samples
from timeline.models import SampleRow

NOW = time.time() - 60


def _append(factory: sessionmaker[Session], uuid: str, util: float, *, commit: bool) -> None:
    with factory() as s:
        samples.store().append(s, node="n1", samples=[SampleRow(NOW, uuid, util_gpu=util)])
        if commit:
            s.commit()
        else:
            s.rollback()


def test_an_id_from_a_rolled_back_insert_is_not_remembered_nor_reused_for_another_gpu(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _append(session_factory, "GPU-a", 10.0, commit=False)  # its id is given back
    assert "GPU-a" not in gpu_id_cache.known(session)
    _append(session_factory, "GPU-b", 20.0, commit=True)  # may take the same id
    _append(session_factory, "GPU-a", 30.0, commit=True)
    latest = samples.store().latest(session)
    assert {u: v["util_gpu"] for u, v in latest.items()} == {"GPU-a": 30.0, "GPU-b": 20.0}


def test_an_id_seen_in_a_session_closed_without_commit_is_not_remembered(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    with session_factory() as s:
        samples.store().append(s, node="n1", samples=[SampleRow(NOW, "GPU-a")])
    assert gpu_id_cache.known(session) == {}


def test_committed_ids_are_remembered_and_used_without_a_lookup(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _append(session_factory, "GPU-a", 10.0, commit=True)
    known = gpu_id_cache.known(session)
    assert set(known) == {"GPU-a"}
    with session_factory() as s:
        s.execute(text("INSERT INTO gpu_ids (uuid, node) VALUES ('GPU-z', 'n1')"))
        s.commit()
    # Proof the remembered id is used unlooked-up: point it, on purpose, at another GPU's row.
    known["GPU-a"] = session.execute(text("SELECT id FROM gpu_ids WHERE uuid = 'GPU-z'")).one()[0]
    _append(session_factory, "GPU-a", 99.0, commit=True)
    assert samples.store().latest(session)["GPU-z"]["util_gpu"] == 99.0
