"""/metrics and /docs behind documented settings (issue #8, finding 7), and the ingest body's
schema in OpenAPI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from timeline.settings import Settings
from web.app import create_app

VIEWER = "viewer-token-for-ops"


def _app(settings: Settings, **flags: bool) -> TestClient:
    closed = settings.model_copy(
        update={"api_tokens": Settings(api_tokens=VIEWER).api_tokens, **flags}
    )
    return TestClient(create_app(closed))


@pytest.fixture()
def private(settings: Settings) -> Iterator[TestClient]:
    """Reads need a token, and so do /metrics and the docs."""
    with _app(settings, metrics_public=False, docs_public=False) as c:
        yield c


def test_metrics_and_docs_are_public_by_default_even_when_reads_need_a_token(
    settings: Settings,
) -> None:
    with _app(settings) as c:
        assert c.get("/api/v1/nodes").status_code == 401
        assert c.get("/metrics").status_code == 200
        assert c.get("/openapi.json").status_code == 200
        assert c.get("/docs").status_code == 200


def test_metrics_need_a_viewer_token_when_not_public(private: TestClient) -> None:
    assert private.get("/metrics").status_code == 401
    r = private.get("/metrics", headers={"Authorization": f"Bearer {VIEWER}"})
    assert r.status_code == 200 and "fleetmedic_ingest_batches" in r.text
    agent = {"Authorization": "Bearer agent-secret-token"}
    assert private.get("/metrics", headers=agent).status_code == 403


def test_docs_need_a_viewer_when_not_public(private: TestClient) -> None:
    assert private.get("/openapi.json").status_code == 401
    page = private.get("/docs", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/docs"
    viewer = {"Authorization": f"Bearer {VIEWER}"}
    assert private.get("/openapi.json", headers=viewer).status_code == 200
    private.post("/login", data={"token": VIEWER, "next": "/docs"})
    assert private.get("/docs").status_code == 200


def test_openapi_publishes_the_ingest_body_schema_with_its_bounds(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/api/v1/ingest"]["post"]["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Batch"}
    schemas = spec["components"]["schemas"]
    assert schemas["Batch"]["properties"]["samples"]["items"] == {
        "$ref": "#/components/schemas/Sample"
    }
    ts = schemas["Sample"]["properties"]["ts"]
    assert (ts["minimum"], ts["maximum"]) == (0.0, 4102444800.0)
    uuid = schemas["Sample"]["properties"]["gpu_uuid"]
    assert uuid["maxLength"] == 96 and "\\x00" in uuid["pattern"]
    code = schemas["Event"]["properties"]["code"]["anyOf"][0]
    assert code["maximum"] == 2**31 - 1
    assert {"409", "413", "422", "503"} <= set(spec["paths"]["/api/v1/ingest"]["post"]["responses"])


def test_metrics_give_the_bytes_on_disk_of_each_sample_table(client: TestClient) -> None:
    text = client.get("/metrics").text
    sizes = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("fleetmedic_table_bytes{")
    }
    for table in ("samples", "samples_1m", "samples_1h", "gpu_latest", "events"):
        assert sizes[table] > 0, table
