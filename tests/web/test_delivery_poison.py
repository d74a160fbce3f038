"""No poison pill, end to end (issue #8, finding 2): the agent's real Delivery against the real
app on each backend. One bad item in a spooled batch never stops a node's telemetry: it ends
in the agent's dead letters with the server's answer, everything else is stored once."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from collector.base import Observations
from collector.delivery import Delivery, Outcome
from collector.spool import Spool
from tests.web.conftest import AGENT_TOKEN
from tests.web.test_ingest import _drop_poison_trigger, _install_poison_trigger
from timeline import queries
from timeline.models import Event, EventKind, Sample
from timeline.settings import Settings
from web.app import create_app


@pytest.fixture()
def server(settings: Settings) -> Iterator[TestClient]:
    """The real app; TestClient is an httpx.Client, so Delivery talks to it unchanged."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def _delivery(tmp_path: Path, server: TestClient) -> Delivery:
    return Delivery(
        spool=Spool(tmp_path / "spool.db"),
        server_url=str(server.base_url),
        token=AGENT_TOKEN,
        agent="agent-n1",
        node="n1",
        client=server,
        attempts_per_round=1,  # bisect_after keeps its default: five failed rounds
        sleep=lambda _: None,
    )


def _samples(n: int, start: int = 0) -> list[Sample]:
    # samples are keyed by (GPU, millisecond): batches that must all be stored take disjoint
    # seconds (`start`), since two calls a fraction of a millisecond apart would otherwise
    # land on the same keys and be stored once
    now = time.time() - 120
    return [
        Sample(ts=now + start + i, gpu_uuid=f"GPU-{i % 4}", util_gpu=float(i % 100))
        for i in range(n)
    ]


def _run(d: Delivery, rounds: int = 200) -> list[Outcome]:
    """What the agent's delivery loop does, one round per flush, until the spool is empty."""
    out = []
    for _ in range(rounds):
        out.append(d.deliver_once())
        if out[-1] is Outcome.EMPTY:
            break
    return out


def _agent_notes(session: Session) -> list[dict[str, object]]:
    return [e for e in queries.events_in_window(session, since=0) if e["kind"] == "agent"]


def test_an_item_a_buggy_agent_spooled_is_rejected_alone_and_the_rest_is_stored(
    tmp_path: Path, server: TestClient, session: Session
) -> None:
    d = _delivery(tmp_path, server)
    # A source that skipped validation (model_construct) spooled a NUL: what once made
    # PostgreSQL answer 500 for ever.
    poison = Event.model_construct(
        ts=time.time(), node="n1", source="joblog", kind=EventKind.NCCL_ERROR,
        message="NCCL WARN \x00", severity="warning", payload={}, count=1,
    )  # fmt: skip
    d.spool.put(Observations(samples=_samples(50), events=[poison]))
    assert _run(d)[-1] is Outcome.EMPTY
    (dead,) = d.spool.dead_letters()
    assert dead["kind"] == "events" and dead["status"] == 422
    assert "events.0.message" in str(dead["detail"]) and "\\u0000" in str(dead["body"])
    assert queries.count_rows(session, table="samples") == 50
    # Visible on the server: its own note, and the agent's note about its dead letter.
    assert {e["source"] for e in _agent_notes(session)} == {"ingest", "agent"}


def test_an_item_the_database_refuses_is_isolated_by_bisection_and_the_rest_is_stored(
    tmp_path: Path, server: TestClient, engine: Engine, session: Session
) -> None:
    d = _delivery(tmp_path, server)
    poison = Event(ts=time.time(), node="n1", source="joblog", kind="other", message="poison")
    d.spool.put(Observations(samples=_samples(30)))
    d.spool.put(Observations(events=[poison]))
    d.spool.put(Observations(samples=_samples(30, start=30)))
    _install_poison_trigger(engine)  # a real database error on that one row: 500
    try:
        outcomes = _run(d)
    finally:
        _drop_poison_trigger(engine)
    assert Outcome.SPLIT in outcomes and outcomes[-1] is Outcome.EMPTY
    (dead,) = d.spool.dead_letters()
    assert dead["status"] == 500 and '"message":"poison"' in str(dead["body"])
    assert queries.count_rows(session, table="samples") == 60
    assert d.stats.bisections >= 5 and d.spool.counters()["dead_lettered_items"] == 1
    assert sum(o is Outcome.RETRY_LATER for o in outcomes) >= 5  # the rounds before bisecting


def test_a_corrupted_spool_item_is_isolated_and_the_rest_of_its_batch_is_stored(
    tmp_path: Path, server: TestClient, session: Session
) -> None:
    d = _delivery(tmp_path, server)
    d.spool.put(Observations(samples=_samples(40)))
    with sqlite3.connect(tmp_path / "spool.db") as raw:  # a torn write: not JSON any more
        raw.execute('UPDATE items SET body = \'{"ts": 1.0, "gpu_u\' WHERE seq = 17')
    assert _run(d)[-1] is Outcome.EMPTY
    (dead,) = d.spool.dead_letters()
    assert dead["status"] == 422 and "not JSON" in str(dead["detail"])
    assert queries.count_rows(session, table="samples") == 39
