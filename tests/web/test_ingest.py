"""POST /api/v1/ingest: tokens, validation, size limit, idempotent replay, all-or-nothing."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from timeline import queries


def batch(batch_id: str = "b-000001", n_gpus: int = 4, message: str = "Xid 79") -> dict[str, Any]:
    """A batch as an agent would send it (times a few minutes ago: inside the ingest window)."""
    now = time.time() - 300
    return {
        "agent": "agent-n1",
        "node": "n1",
        "batch_id": batch_id,
        "gpus": [{"uuid": f"GPU-{i}", "node": "n1", "index": i} for i in range(n_gpus)],
        "samples": [{"ts": now, "gpu_uuid": f"GPU-{i}", "util_gpu": 97.0} for i in range(n_gpus)],
        "events": [
            {
                "ts": now + 0.5,
                "node": "n1",
                "source": "kmsg",
                "kind": "xid",
                "code": 79,
                "message": message,
            }
        ],
    }


def count(session: Session, table: str) -> int:
    return queries.count_rows(session, table=table)


def test_ingest_stores_a_batch_and_reports_counts(
    client: TestClient, auth: dict[str, str], session: Session
) -> None:
    r = client.post("/api/v1/ingest", json=batch(), headers=auth)
    assert r.status_code == 200, r.text
    assert (r.json()["samples"], r.json()["events"]) == (4, 1)
    assert r.json()["duplicate"] is False
    assert count(session, "samples") == 4 and count(session, "events") == 1


def test_replayed_batch_is_acknowledged_and_stored_once(
    client: TestClient, auth: dict[str, str], session: Session
) -> None:
    body = batch()
    for _ in range(3):
        r = client.post("/api/v1/ingest", json=body, headers=auth)
        assert r.status_code == 200
    assert r.json()["duplicate"] is True
    assert count(session, "samples") == 4 and count(session, "ingest_batches") == 1


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "agent-secret-token"}, 401),  # no scheme
        ({"Authorization": "Basic YWxhZGRpbjpvcGVu"}, 401),
        ({"Authorization": "Bearer "}, 401),
        ({"Authorization": "Bearer wrong-token"}, 403),
    ],
)
def test_bad_tokens_are_refused_and_store_nothing(
    client: TestClient, session: Session, headers: dict[str, str], status: int
) -> None:
    r = client.post("/api/v1/ingest", json=batch(), headers=headers)
    assert r.status_code == status
    assert "token" in r.json()["detail"].lower() or "authorization" in r.json()["detail"].lower()
    assert count(session, "ingest_batches") == 0


def test_invalid_item_is_rejected_by_field_and_the_rest_is_stored(
    client: TestClient, auth: dict[str, str], session: Session
) -> None:
    bad = batch()
    bad["samples"][2]["util_gpu"] = "very busy"
    r = client.post("/api/v1/ingest", json=bad, headers=auth)
    assert r.status_code == 200, r.text
    (rejected,) = r.json()["rejected"]
    assert (rejected["kind"], rejected["index"], rejected["status"]) == ("samples", 2, 422)
    assert [e["field"] for e in rejected["errors"]] == ["samples.2.util_gpu"]
    assert r.json()["samples"] == 3 and count(session, "samples") == 3


def test_invalid_envelope_gets_422_naming_the_bad_field(
    client: TestClient, auth: dict[str, str], session: Session
) -> None:
    for field, value in (("node", ""), ("batch_id", "short"), ("samples", {"not": "a list"})):
        bad = batch() | {field: value}
        r = client.post("/api/v1/ingest", json=bad, headers=auth)
        assert r.status_code == 422, (field, r.text)
        assert field in [e["field"] for e in r.json()["detail"]]
    assert count(session, "samples") == 0 and count(session, "ingest_batches") == 0


def test_truncated_json_gets_422(client: TestClient, auth: dict[str, str]) -> None:
    body = json.dumps(batch())[:-40]
    r = client.post(
        "/api/v1/ingest", content=body, headers=auth | {"Content-Type": "application/json"}
    )
    assert r.status_code == 422
    assert "json" in json.dumps(r.json()).lower()


def test_oversized_body_gets_413_and_stores_nothing(
    settings: Any, auth: dict[str, str], session: Session
) -> None:
    from web.app import create_app

    settings.max_body_bytes = 2_000
    with TestClient(create_app(settings)) as small:
        r = small.post("/api/v1/ingest", json=batch(n_gpus=40), headers=auth)
        assert r.status_code == 413

        def chunks() -> Any:  # no Content-Length: the limit is enforced while streaming
            payload = json.dumps(batch(n_gpus=40)).encode()
            for i in range(0, len(payload), 500):
                yield payload[i : i + 500]

        r = small.post("/api/v1/ingest", content=chunks(), headers=auth)
        assert r.status_code == 413
    assert count(session, "ingest_batches") == 0


def test_batch_over_item_limit_gets_413(
    settings: Any, auth: dict[str, str], session: Session
) -> None:
    from web.app import create_app

    settings.max_batch_items = 5
    with TestClient(create_app(settings)) as small:
        r = small.post("/api/v1/ingest", json=batch(n_gpus=4), headers=auth)
    assert r.status_code == 413 and "limit" in r.json()["detail"]
    assert count(session, "samples") == 0


def _install_poison_trigger(engine: Engine) -> None:
    """A real database error on one event row, after the samples went in."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(
                text(
                    "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.message = 'poison' "
                    "BEGIN SELECT RAISE(ABORT, 'poisoned event'); END"
                )
            )
        else:
            conn.execute(
                text(
                    "CREATE OR REPLACE FUNCTION poison() RETURNS trigger AS $$ BEGIN "
                    "IF NEW.message = 'poison' THEN RAISE EXCEPTION 'poisoned event'; END IF; "
                    "RETURN NEW; END $$ LANGUAGE plpgsql"
                )
            )
            conn.execute(
                text(
                    "CREATE TRIGGER poison BEFORE INSERT ON events FOR EACH ROW "
                    "EXECUTE FUNCTION poison()"
                )
            )


def _drop_poison_trigger(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "DROP TRIGGER IF EXISTS poison"
                + ("" if engine.dialect.name == "sqlite" else " ON events")
            )
        )


def test_batch_failing_in_the_database_leaves_nothing_and_can_be_retried(
    settings: Any, engine: Engine, auth: dict[str, str], session: Session
) -> None:
    from web.app import create_app

    _install_poison_trigger(engine)
    try:
        with TestClient(create_app(settings), raise_server_exceptions=False) as c:
            r = c.post("/api/v1/ingest", json=batch(message="poison"), headers=auth)
            assert r.status_code == 500
            assert r.json() == {"detail": "internal error"}  # the database's words stay inside
            assert count(session, "samples") == 0
            assert count(session, "ingest_batches") == 0  # the batch id was not burnt
            assert count(session, "gpus") == 0
    finally:
        _drop_poison_trigger(engine)
    with TestClient(create_app(settings)) as c:
        r = c.post("/api/v1/ingest", json=batch(message="poison"), headers=auth)
    assert r.status_code == 200 and r.json()["duplicate"] is False
    assert count(session, "samples") == 4


def _samples_only(batch_id: str, util: float = 97.0) -> dict[str, Any]:
    body = batch(batch_id)
    del body["gpus"], body["events"]
    for s in body["samples"]:
        s["util_gpu"] = util
    return body


def test_a_sample_only_batch_is_group_committed_and_answered_as_if_alone(
    client: TestClient, auth: dict[str, str], session: Session
) -> None:
    body = _samples_only("group-0001")
    first = client.post("/api/v1/ingest", json=body, headers=auth)
    assert first.status_code == 200 and first.json()["samples"] == 4
    assert first.json()["duplicate"] is False
    replay = client.post("/api/v1/ingest", json=body, headers=auth)
    assert replay.status_code == 200 and replay.json()["duplicate"] is True
    other = client.post("/api/v1/ingest", json=_samples_only("group-0001", 5.0), headers=auth)
    assert other.status_code == 409
    writer = client.app.state.group_writer  # type: ignore[attr-defined]
    assert writer.batches == 1  # the first went through the group writer
    metrics = client.get("/metrics").text
    assert "fleetmedic_ingest_group_batches_total 1.0" in metrics
    assert "fleetmedic_ingest_group_transactions_total 1.0" in metrics
    assert count(session, "samples") == 4 and count(session, "ingest_batches") == 1


def test_group_commit_off_stores_each_batch_in_its_own_transaction(
    settings: Any, auth: dict[str, str], session: Session
) -> None:
    from web.app import create_app

    with TestClient(create_app(settings.model_copy(update={"ingest_group_commit": False}))) as c:
        assert c.app.state.group_writer is None  # type: ignore[attr-defined]
        r = c.post("/api/v1/ingest", json=_samples_only("alone-0001"), headers=auth)
    assert r.status_code == 200 and r.json()["samples"] == 4
    assert count(session, "samples") == 4
