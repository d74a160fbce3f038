"""Incidents written by the correlator reach the API and the fleet page."""

from __future__ import annotations

from fastapi.testclient import TestClient

from correlator.jobs import run_correlator
from tests.web.test_read_api import fleet_batch


def test_xid79_becomes_an_open_gpu_hardware_incident_on_api_and_page(
    client: TestClient, auth: dict[str, str]
) -> None:
    r = client.post("/api/v1/ingest", json=fleet_batch(), headers=auth)
    assert r.status_code == 200
    app = client.app
    report = run_correlator(app.state.session_factory, app.state.settings)  # type: ignore[attr-defined]
    assert report is not None and report.incidents_opened >= 1
    found = client.get("/api/v1/incidents", params={"state": "open"}).json()
    xid79 = [i for i in found if i["code"] == 79]
    assert len(xid79) == 1
    incident = xid79[0]
    assert (incident["category"], incident["blame"]) == ("gpu_hardware", "node")
    assert incident["culprit_node"] == "gpu-node-01"
    assert "fallen off the bus" in incident["explanation"].lower()
    one = client.get(f"/api/v1/incidents/{incident['id']}").json()
    assert one["fingerprint"] == incident["fingerprint"]
    assert client.get("/api/v1/incidents/999999").status_code == 404
    page = client.get("/").text
    assert 'id="open-incidents"' in page and 'data-category="gpu_hardware"' in page


def test_idle_endpoints_answer_with_lists(client: TestClient) -> None:
    assert client.get("/api/v1/idle").json() == []
    assert client.get("/api/v1/idle/totals", params={"by": "account"}).json() == []
    assert client.get("/api/v1/idle/totals", params={"by": "nope"}).status_code == 422
