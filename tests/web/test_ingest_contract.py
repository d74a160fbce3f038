"""The boundary contract at the ingest endpoint, attacked as a hostile user or a buggy agent.

Issue #8, findings 2-4, 7 and 8: a value the database would refuse, a value with no sense, or
an oversized one is rejected item by item (named by field) while the rest of the batch is
stored; a batch_id replayed with other content is a 409; an agent writes only its own nodes.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.web.conftest import AGENT_TOKEN
from timeline import queries
from timeline.settings import Settings
from web.app import create_app

NOW = time.time()


def _batch(batch_id: str, **items: list[dict[str, Any]]) -> dict[str, Any]:
    """One good sample (GPU-ok) plus the given items."""
    good = {"ts": NOW - 60, "gpu_uuid": "GPU-ok", "util_gpu": 50.0}
    body: dict[str, Any] = {"agent": "a", "node": "n1", "batch_id": batch_id, "samples": [good]}
    for kind, values in items.items():
        body[kind] = body.get(kind, []) + values
    return body


def _event(**fields: Any) -> dict[str, Any]:
    return {"ts": NOW - 30, "node": "n1", "source": "joblog", "kind": "nccl_error"} | fields


def _sample(**fields: Any) -> dict[str, Any]:
    return {"ts": NOW - 30, "gpu_uuid": "GPU-bad"} | fields


def _job(**fields: Any) -> dict[str, Any]:
    return {"scheduler": "slurm", "job_id": "77", "nodes": ["n1"]} | fields


def _node(**fields: Any) -> dict[str, Any]:
    return {"name": "n1"} | fields


def _alloc(**fields: Any) -> dict[str, Any]:
    return {"scheduler": "slurm", "job_id": "77", "node": "n1", "start_ts": NOW - 99} | fields


HUGE = 10**30
# (kind, item, the field the answer must name): each made one node's telemetry stop for good
# (a 500 the agent resends for ever) or stored a value with no sense (finding 2 and 3).
HOSTILE = [
    ("events", _event(message="NCCL WARN \x00 from a user's job"), "events.1.message"),
    ("events", _event(raw="line\x00with NUL"), "events.1.raw"),
    ("events", _event(code=2**31), "events.1.code"),
    ("events", _event(payload={"rank": "\x00"}), "events.1.payload"),
    ("events", _event(payload={"n": 2**63}), "events.1.payload"),
    ("events", _event(ts=32503680000.0), "events.1.ts"),  # year 3000
    ("events", _event(ts=-1.0), "events.1.ts"),  # before 1970
    ("events", _event(ts=7e16), "events.1.ts"),  # made GET / answer 500 for good
    ("samples", _sample(ecc_sbe_volatile=2**63), "samples.1.ecc_sbe_volatile"),
    ("samples", _sample(pcie_replay=2**64), "samples.1.pcie_replay"),
    ("samples", _sample(nvlink_crc_errors=HUGE), "samples.1.nvlink_crc_errors"),
    ("samples", _sample(retired_pages_dbe=-3), "samples.1.retired_pages_dbe"),
    ("samples", _sample(ts="NaN"), "samples.1.ts"),
    ("samples", _sample(util_gpu="Infinity"), "samples.1.util_gpu"),
    ("samples", _sample(power_w="-Infinity"), "samples.1.power_w"),
    ("samples", _sample(power_w=1e308), "samples.1.power_w"),
    ("samples", _sample(extra={"sm_active": "NaN"}), "samples.1.extra.sm_active"),
    ("samples", _sample(gpu_uuid="GPU-\x00"), "samples.1.gpu_uuid"),
    ("gpus", [{"uuid": "GPU-x", "node": "n1", "index": 2**31}], "gpus.0.index"),
    ("jobs", _job(exit_code=HUGE), "jobs.0.exit_code"),
    ("jobs", _job(name="train\x00"), "jobs.0.name"),
    ("jobs", _job(user="eve\x1b[31m"), "jobs.0.user"),
    ("jobs", _job(gpus=-8), "jobs.0.gpus"),
    ("nodes", _node(gpu_count=-1), "nodes.0.gpu_count"),
    ("nodes", _node(labels={"zone": "a\x00"}), "nodes.0.labels.zone"),
    ("allocations", _alloc(gpu_index=2**31), "allocations.0.gpu_index"),
    ("allocations", _alloc(start_ts=float("1e300")), "allocations.0.start_ts"),
]


@pytest.mark.parametrize(("kind", "item", "field"), HOSTILE, ids=[h[2] for h in HOSTILE])
def test_one_hostile_item_is_rejected_by_field_and_the_rest_of_the_batch_is_stored(
    client: TestClient, auth: dict[str, str], session: Session, kind: str, item: Any, field: str
) -> None:
    items = item if isinstance(item, list) else [item]
    extra = [_event(message="a good event")] if kind == "events" else []  # samples: one good
    r = client.post(
        "/api/v1/ingest", json=_batch("hostile-0001", **{kind: extra + items}), headers=auth
    )
    assert r.status_code == 200, r.text
    rejected = r.json()["rejected"]
    assert [(x["kind"], x["status"]) for x in rejected] == [(kind, 422)]
    assert any(e["field"] == field for e in rejected[0]["errors"]), rejected
    assert r.json()["samples"] == 1  # the good sample went in
    assert queries.count_rows(session, table="ingest_batches") == 1
    # What was stored reads back: no poison in the store, no 500 on any page or list.
    for url in ("/", "/api/v1/gpus", "/api/v1/events", "/api/v1/jobs", "/api/v1/nodes"):
        assert client.get(url).status_code == 200, url


def test_the_server_notes_a_node_whose_items_it_rejects_as_an_agent_event(
    client: TestClient, auth: dict[str, str]
) -> None:
    for i in range(3):  # three batches in a row: one note, not three
        body = _batch(f"reject-note-{i}", events=[_event(code=2**40)])
        assert client.post("/api/v1/ingest", json=body, headers=auth).status_code == 200
    notes = client.get("/api/v1/events", params={"kind": "agent", "node": "n1"}).json()
    assert len(notes) == 1 and notes[0]["source"] == "ingest"
    assert "rejected 1 of 2 items" in notes[0]["message"] and "events.0.code" in notes[0]["message"]
    metrics = client.get("/metrics").text
    assert 'fleetmedic_ingest_rejected_items_total{kind="events",status="422"} 3.0' in metrics


def test_log_text_over_its_cap_is_truncated_with_a_marker_not_refused(
    client: TestClient, auth: dict[str, str]
) -> None:
    body = _batch("long-text-01", events=[_event(message="m" * 10_000_000, raw="r" * 100_000)])
    r = client.post("/api/v1/ingest", json=body, headers=auth)
    assert r.status_code == 200 and r.json()["rejected"] == [] and r.json()["events"] == 1
    (event,) = client.get("/api/v1/events").json()
    assert len(event["message"]) == 4096 and event["message"].endswith("...[truncated]")
    assert len(event["raw"]) == 16384 and event["raw"].endswith("...[truncated]")


DEEP = {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": 1}}}}}}}}  # 9 levels


@pytest.mark.parametrize(
    ("kind", "item", "field"),
    [
        ("events", _event(payload={"blob": "x" * 10_000_000}), "events.0.payload"),
        ("events", _event(payload=DEEP), "events.0.payload"),
        ("nodes", _node(labels={f"k{i}": "v" * 100 for i in range(100_000)}), "nodes.0.labels"),
        ("nodes", _node(taints=[{"key": "x" * 10_000_000}]), "nodes.0.taints"),
        ("samples", _sample(extra={f"f{i}": 1.0 for i in range(100_000)}), "samples.0.extra"),
        ("jobs", _job(payload={"env": "y" * 10_000_000}), "jobs.0.payload"),
    ],
    ids=["payload-10MB", "payload-deep", "labels-10MB", "taints-10MB", "extra-100k", "job-10MB"],
)
def test_json_fields_are_capped_in_bytes_and_depth(
    client: TestClient, auth: dict[str, str], kind: str, item: Any, field: str
) -> None:
    r = client.post("/api/v1/ingest", json={"agent": "a", "node": "n1",
                    "batch_id": "json-caps-01", kind: [item]}, headers=auth)  # fmt: skip
    assert r.status_code == 200, r.text[:500]
    (rejected,) = r.json()["rejected"]
    assert any(e["field"] == field for e in rejected["errors"]), rejected


def test_every_item_kind_counts_toward_the_batch_limit(settings: Settings) -> None:
    settings.max_batch_items = 100
    patches = [{"job_id": str(i), "wandb_run": "e/p/r"} for i in range(200_000)]
    with TestClient(create_app(settings)) as c:
        r = c.post(
            "/api/v1/ingest",
            json={"agent": "a", "node": "n1", "batch_id": "patches-0001", "job_patches": patches},
            headers={"Authorization": f"Bearer {AGENT_TOKEN}"},
        )
    assert r.status_code == 413 and "200000 items" in r.json()["detail"]


def test_records_stored_one_statement_each_have_a_lower_cap(settings: Settings) -> None:
    settings.max_batch_records = 50
    jobs = [{"scheduler": "slurm", "job_id": str(i)} for i in range(5000)]
    samples = [{"ts": NOW - 1, "gpu_uuid": f"GPU-{i}"} for i in range(500)]
    with TestClient(create_app(settings)) as c:
        auth = {"Authorization": f"Bearer {AGENT_TOKEN}"}
        many = {"agent": "a", "node": "n1", "batch_id": "records-0001", "jobs": jobs}
        r = c.post("/api/v1/ingest", json=many, headers=auth)
        assert r.status_code == 413 and "5000 GPUs, jobs" in r.json()["detail"]
        telemetry = {"agent": "a", "node": "n1", "batch_id": "records-0002", "samples": samples}
        assert c.post("/api/v1/ingest", json=telemetry, headers=auth).status_code == 200


def test_list_reads_stop_at_the_response_cap_and_say_how_many_were_left_out(
    settings: Settings, session: Session
) -> None:
    settings.api_max_response_bytes = 60_000
    events = [_event(message=f"{i} " + "w" * 4000, ts=NOW - 100 + i) for i in range(40)]
    with TestClient(create_app(settings)) as c:
        auth = {"Authorization": f"Bearer {AGENT_TOKEN}"}
        assert c.post("/api/v1/ingest", json=_batch("cap-0001", events=events),
                      headers=auth).status_code == 200  # fmt: skip
        r = c.get("/api/v1/events", params={"limit": 1000})
    assert r.status_code == 200 and len(r.content) <= 60_000
    shown = len(r.json())
    assert 0 < shown < 40 and int(r.headers["x-truncated"]) == 40 - shown


def test_a_replayed_batch_id_with_other_content_is_a_409_counted_and_logged(
    client: TestClient, auth: dict[str, str], session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    first = _batch("replayed-0001", events=[_event(message="the original")])
    assert client.post("/api/v1/ingest", json=first, headers=auth).json()["duplicate"] is False
    again = client.post("/api/v1/ingest", json=first, headers=auth)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    forged = _batch("replayed-0001", events=[_event(message="something else")])
    with caplog.at_level(logging.WARNING, logger="web.api.ingest"):
        r = client.post("/api/v1/ingest", json=forged, headers=auth)
    assert r.status_code == 409 and "different content" in r.json()["detail"]
    assert "replayed-0001" in caplog.text and "409" in caplog.text
    assert 'fleetmedic_ingest_batches_total{result="conflict"} 1.0' in client.get("/metrics").text
    messages = [e["message"] for e in client.get("/api/v1/events").json()]
    assert messages == ["the original"]


def test_a_node_bound_agent_writes_no_other_nodes_data_in_any_item(
    settings: Settings, session: Session
) -> None:
    bound = settings.model_copy(
        update={"agent_tokens": Settings(agent_tokens="bound-token@gpu-node-0*").agent_tokens}
    )
    other = "login-01"
    body = {
        "agent": "a",
        "node": "gpu-node-01",
        "batch_id": "binding-0001",
        "gpus": [{"uuid": "GPU-1", "node": "gpu-node-01"}, {"uuid": "GPU-2", "node": other}],
        "events": [_event(node="gpu-node-01"), _event(node=other), _event(node=None)],
        "allocations": [_alloc(node="gpu-node-01"), _alloc(node=other, gpu_index=3)],
        "nodes": [_node(name="gpu-node-01"), _node(name=other)],
        "jobs": [_job(nodes=["gpu-node-01", other])],
    }
    with TestClient(create_app(bound)) as c:
        r = c.post("/api/v1/ingest", json=body, headers={"Authorization": "Bearer bound-token"})
    assert r.status_code == 200, r.text
    refused = {(x["kind"], x["index"], x["status"]) for x in r.json()["rejected"]}
    assert refused == {("gpus", 1, 403), ("events", 1, 403), ("allocations", 1, 403),
                       ("nodes", 1, 403), ("jobs", 0, 403)}  # fmt: skip
    assert {n["name"] for n in queries.list_nodes(session)} == {"gpu-node-01"}
    assert queries.count_rows(session, table="gpus") == 1
    assert queries.count_rows(session, table="allocations") == 1


def test_a_node_bound_agent_cannot_rehome_or_write_for_another_nodes_gpu(
    settings: Settings, session: Session
) -> None:
    bound = settings.model_copy(
        update={
            "agent_tokens": Settings(
                agent_tokens="owner-token@gpu-node-02,thief-token@gpu-node-01"
            ).agent_tokens
        }
    )
    now = time.time()
    owner = {"agent": "a", "node": "gpu-node-02", "batch_id": "owner-0001",
             "gpus": [{"uuid": "GPU-OWNED", "node": "gpu-node-02"}]}  # fmt: skip
    stolen = {
        "agent": "b",
        "node": "gpu-node-01",
        "batch_id": "thief-0001",
        "gpus": [{"uuid": "GPU-OWNED", "node": "gpu-node-01"},
                 {"uuid": "GPU-MINE", "node": "gpu-node-01"}],
        "samples": [{"gpu_uuid": "GPU-MINE", "ts": now, "util_gpu": 5.0},
                    {"gpu_uuid": "GPU-OWNED", "ts": now, "util_gpu": 99.0}],
        "events": [_event(node="gpu-node-01", gpu_uuid="GPU-OWNED")],
    }  # fmt: skip
    with TestClient(create_app(bound)) as c:
        first = c.post(
            "/api/v1/ingest", json=owner, headers={"Authorization": "Bearer owner-token"}
        )
        assert first.status_code == 200 and not first.json()["rejected"], first.text
        r = c.post("/api/v1/ingest", json=stolen, headers={"Authorization": "Bearer thief-token"})
        gpus = {g["uuid"]: g for g in c.get("/api/v1/gpus").json()}
    assert r.status_code == 200, r.text
    refused = {(x["kind"], x["index"], x["status"]) for x in r.json()["rejected"]}
    assert refused == {("gpus", 0, 403), ("samples", 1, 403), ("events", 0, 403)}
    assert "gpu-node-02" in r.json()["rejected"][0]["errors"][0]["error"]
    assert {u: g["node"] for u, g in gpus.items()} == {
        "GPU-OWNED": "gpu-node-02",
        "GPU-MINE": "gpu-node-01",
    }
    assert gpus["GPU-MINE"]["util_gpu"] == 5.0 and gpus["GPU-OWNED"]["util_gpu"] is None


def test_a_gpu_known_only_from_its_samples_is_owned_by_the_node_that_sent_them_first(
    settings: Settings,
) -> None:
    bound = settings.model_copy(
        update={
            "agent_tokens": Settings(
                agent_tokens="owner-token@gpu-node-02,thief-token@gpu-node-01"
            ).agent_tokens
        }
    )
    now = time.time()
    sample = {"gpu_uuid": "GPU-SAMPLED", "ts": now, "util_gpu": 7.0}
    owner = {"agent": "a", "node": "gpu-node-02", "batch_id": "owner-0002", "samples": [sample]}
    stolen = {"agent": "b", "node": "gpu-node-01", "batch_id": "thief-0002",
              "samples": [sample | {"ts": now + 1, "util_gpu": 99.0}]}  # fmt: skip
    with TestClient(create_app(bound)) as c:
        assert (
            c.post(
                "/api/v1/ingest", json=owner, headers={"Authorization": "Bearer owner-token"}
            ).status_code
            == 200
        )
        r = c.post("/api/v1/ingest", json=stolen, headers={"Authorization": "Bearer thief-token"})
    assert r.status_code == 200, r.text
    assert [(x["kind"], x["index"], x["status"]) for x in r.json()["rejected"]] == [
        ("samples", 0, 403)
    ]
