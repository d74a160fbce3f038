"""/api/v1/actions and the healer's other endpoints: filters, audit, admin-only approve/reject
and breaker reset, an incident's actions and a job's lineage in their API answers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from correlator.jobs import run_correlator
from healer import service
from healer.jobs import heal_once
from healer.models import Lineage
from healer.policy import Policy, Scope
from healer.steps import HealerContext
from tests.web.test_read_api import fleet_batch
from timeline.db import unit_of_work
from timeline.settings import Settings
from web.app import create_app

VIEWER, ADMIN = "viewer-token-123456", "admin-token-abcdef"
V, A = {"Authorization": f"Bearer {VIEWER}"}, {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture()
def app_client(settings: Settings) -> Iterator[TestClient]:
    """An app with one viewer and one admin token (named alice)."""
    settings = settings.model_copy(
        update={"api_tokens": Settings(api_tokens=f"{VIEWER},admin:alice:{ADMIN}").api_tokens}
    )
    with TestClient(create_app(settings)) as c:
        yield c


def _batch() -> dict[str, Any]:
    """The read API's fleet with its Xid 79 on GPU 1, which job 4242 holds."""
    batch = fleet_batch()
    event = batch["events"][0]
    event["pci_bus_id"] = "0000:19:00"
    event["raw"] = event["raw"].replace("0000:1b:00", "0000:19:00")
    return batch


def _incident_with_actions(client: TestClient, policy: Policy) -> int:
    """A real Xid 79 under a running job, correlated, then one healer pass (no actors: plans)."""
    agent = {"Authorization": "Bearer agent-secret-token"}
    assert client.post("/api/v1/ingest", json=_batch(), headers=agent).status_code == 200
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    run_correlator(factory, client.app.state.settings)  # type: ignore[attr-defined]
    heal_once(HealerContext(factory=factory, policy=policy))
    (inc,) = [i for i in client.get("/api/v1/incidents", headers=V).json() if i["code"] == 79]
    return int(inc["id"])


def test_a_new_install_lists_what_it_would_do_and_the_incident_links_to_it(
    app_client: TestClient,
) -> None:
    inc = _incident_with_actions(app_client, Policy())
    actions = app_client.get("/api/v1/actions", headers=V).json()
    assert {(a["kind"], a["state"], a["mode"]) for a in actions} == {
        ("drain", "planned", "observe"),
        ("recover", "planned", "observe"),
        ("notify", "planned", "observe"),
    }
    assert [
        a["kind"]
        for a in app_client.get(
            "/api/v1/actions", params={"kind": "recover", "job_id": "4242"}, headers=V
        ).json()
    ] == ["recover"]
    assert app_client.get("/api/v1/actions", params={"state": "done"}, headers=V).json() == []
    one = app_client.get(f"/api/v1/actions/{actions[0]['id']}", headers=V).json()
    assert one["audit"][0]["output"] == "planned (observe)"
    detail = app_client.get(f"/api/v1/incidents/{inc}", headers=V).json()
    assert sorted(a["kind"] for a in detail["actions"]) == ["drain", "notify", "recover"]
    assert app_client.get("/api/v1/actions", params={"kind": "nope"}, headers=V).status_code == 422


def test_only_admins_approve_and_reject_and_observe_mode_is_refused(
    app_client: TestClient,
) -> None:
    _incident_with_actions(app_client, Policy(act=[Scope(approval=True)]))
    drain, recover = (
        next(a for a in app_client.get("/api/v1/actions", headers=V).json() if a["kind"] == k)
        for k in ("drain", "recover")
    )
    url = f"/api/v1/actions/{drain['id']}/approve"
    assert app_client.post(url).status_code == 401
    assert app_client.post(url, headers=V).status_code == 403
    ok = app_client.post(url, headers=A)
    assert ok.status_code == 200 and ok.json()["approved_by"] == "alice"
    assert app_client.post(url, headers=A).status_code == 409  # not planned any more
    rej = app_client.post(f"/api/v1/actions/{recover['id']}/reject", headers=A)
    assert rej.status_code == 200 and rej.json()["state"] == "cancelled"
    assert app_client.post("/api/v1/actions/99999/approve", headers=A).status_code == 404


def test_breaker_state_and_an_admin_reset(app_client: TestClient) -> None:
    assert app_client.get("/api/v1/healer/breaker", headers=V).json()["tripped"] is False
    assert app_client.post("/api/v1/healer/breaker/reset", headers=V).status_code == 403
    reset = app_client.post("/api/v1/healer/breaker/reset", headers=A).json()
    assert (reset["epoch"], reset["reset_by"]) == (1, "alice")
    assert app_client.get("/api/v1/healer/nodes", headers=V).json() == []
    assert app_client.get("/api/v1/healer/notices", headers=V).json() == []


def test_a_job_answer_carries_its_lineage(app_client: TestClient) -> None:
    agent = {"Authorization": "Bearer agent-secret-token"}
    assert app_client.post("/api/v1/ingest", json=fleet_batch(), headers=agent).status_code == 200
    factory = app_client.app.state.session_factory  # type: ignore[attr-defined]
    with unit_of_work(factory) as s:
        service.add_lineage(
            s,
            lineage=Lineage(
                scheduler="slurm",
                old_job_id="4242",
                new_job_id="4243",
                how="resubmit",
                action_id=7,
                step=300,
                checkpoint="/ckpt/checkpoint-300",
                ts=time.time(),
            ),
        )
    job = app_client.get("/api/v1/jobs/4242", headers=V).json()
    assert [(x["new_job_id"], x["step"]) for x in job["lineage"]] == [("4243", 300)]
    chain = app_client.get("/api/v1/jobs/4243/lineage", headers=V).json()
    assert [x["old_job_id"] for x in chain] == ["4242"]


def test_metrics_show_the_breaker_and_actions_by_kind_and_result(app_client: TestClient) -> None:
    from healer import safety

    _incident_with_actions(app_client, Policy(act=[Scope(approval=True)]))
    factory = app_client.app.state.session_factory  # type: ignore[attr-defined]
    drain = next(
        a for a in app_client.get("/api/v1/actions", headers=V).json() if a["kind"] == "drain"
    )
    app_client.post(f"/api/v1/actions/{drain['id']}/reject", headers=A)
    text = app_client.get("/metrics").text
    assert "fleetmedic_healer_breaker_tripped 0.0" in text
    assert 'fleetmedic_healer_actions_total{action="drain",result="cancelled"} 1.0' in text
    assert 'fleetmedic_healer_actions_pending{action="recover",state="planned"} 1.0' in text
    with unit_of_work(factory) as s:
        safety.trip(
            s, reason="5 drains in c within 3600 s (cap 5)", scope="c", now=time.time(), fence=None
        )
    assert "fleetmedic_healer_breaker_tripped 1.0" in app_client.get("/metrics").text
    assert app_client.get("/api/v1/healer/breaker", headers=V).json()["tripped"] is True
