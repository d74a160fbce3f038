"""Error mapping (issue #8, finding 6): bad ids and filters are 422, a locked or full database
is 503 with Retry-After, /healthz (alive) and /readyz (can write) tell different things."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text
from sqlalchemy.engine import make_url

from tests.web.conftest import AGENT_TOKEN
from timeline.settings import Settings
from web.app import create_app

AUTH = {"Authorization": f"Bearer {AGENT_TOKEN}"}


def _batch(batch_id: str, n: int = 5) -> dict[str, Any]:
    now = time.time()
    samples = [{"ts": now - i, "gpu_uuid": f"GPU-{i % 8}", "util_gpu": 10.0} for i in range(n)]
    return {"agent": "a", "node": "n1", "batch_id": batch_id, "samples": samples}


BAD_READS = [
    ("/api/v1/incidents/9223372036854775808", None),  # 2^63
    ("/api/v1/incidents/1000000000000000000000000000000", None),
    ("/api/v1/incidents/0", None),
    ("/api/v1/gpus", {"node": "\x00"}),
    ("/api/v1/events", {"node": "n\x00"}),
    ("/api/v1/events", {"job_id": "\x00"}),
    ("/api/v1/events", {"kind": "\x00"}),
    ("/api/v1/events", {"since": "nan"}),
    ("/api/v1/events", {"until": "inf"}),
    ("/api/v1/events", {"since": "1e400"}),
    ("/api/v1/events", {"limit": "100000000000000000000"}),
    ("/api/v1/jobs", {"state": "\x00RUNNING"}),
    ("/api/v1/jobs/%00", None),
    ("/api/v1/jobs/" + "j" * 500, None),
    ("/api/v1/incidents", {"node": "\x00"}),
    ("/api/v1/incidents", {"job_id": "\x00"}),
    ("/api/v1/incidents", {"category": "\x00"}),
]


@pytest.mark.parametrize(("url", "params"), BAD_READS, ids=[f"{u}?{p}" for u, p in BAD_READS])
def test_ids_beyond_int64_and_nul_in_filters_are_a_422_naming_the_parameter(
    settings: Settings, url: str, params: dict[str, str] | None
) -> None:
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        r = c.get(url, params=params)
    assert r.status_code == 422, r.text
    named = {str(e["loc"][-1]) for e in r.json()["detail"]}
    assert named & {"incident_id", "job_id", "node", "kind", "since", "until", "limit", "state",
                    "category"}, r.text  # fmt: skip


@contextmanager
def _locked(engine: Engine, url: str) -> Iterator[None]:
    """Another process's write transaction holds the whole database (or its tables)."""
    if engine.dialect.name == "sqlite":
        path = make_url(url).database
        assert path is not None
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    with engine.connect() as holder:
        holder.execute(
            text("LOCK TABLE ingest_batches, server_heartbeats IN ACCESS EXCLUSIVE MODE")
        )
        try:
            yield
        finally:
            holder.rollback()


def test_a_locked_database_is_a_503_with_retry_after_and_only_readyz_says_so(
    settings: Settings, engine: Engine, migrated_url: str
) -> None:
    settings.database_busy_timeout_s = 0.5
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        assert c.get("/readyz").status_code == 200
        with _locked(engine, migrated_url):
            r = c.post("/api/v1/ingest", json=_batch("locked-0001"), headers=AUTH)
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"] == "2" and "locked" in r.json()["detail"]
            ready = c.get("/readyz")
            assert ready.status_code == 503 and ready.headers["retry-after"] == "2"
            assert c.get("/healthz").status_code == 200  # alive: nothing to restart
        r = c.post("/api/v1/ingest", json=_batch("locked-0001"), headers=AUTH)
        assert r.status_code == 200 and r.json()["samples"] == 5  # the retry goes in
        assert c.get("/readyz").status_code == 200
        metrics = c.get("/metrics").text
    assert 'fleetmedic_store_unavailable_total{reason="database is locked"} 2.0' in metrics


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_a_full_database_is_a_503_with_retry_after_and_loses_nothing_once_there_is_room(
    settings: Settings, migrated_url: str
) -> None:
    app = create_app(settings)
    path = make_url(migrated_url).database
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("VACUUM")  # no free pages left from earlier tests: every new row needs room
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    room = {"max_pages": pages}

    @event.listens_for(app.state.engine, "connect")
    def _cap(dbapi_conn: Any, _: Any) -> None:  # SQLite's own size limit: a full disk to it
        dbapi_conn.execute(f"PRAGMA max_page_count={room['max_pages']}")

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/api/v1/ingest", json=_batch("full-000001", n=3000), headers=AUTH)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "60" and "full" in r.json()["detail"]
    room["max_pages"] = 1_000_000_000
    with TestClient(create_app(settings)) as c:
        r = c.post("/api/v1/ingest", json=_batch("full-000001", n=3000), headers=AUTH)
    assert r.status_code == 200 and r.json()["samples"] == 3000
