"""The read API and the fleet page show what was ingested, classified."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from timeline.settings import Settings
from web.app import create_app


def fleet_batch() -> dict[str, Any]:
    """One node of four GPUs: busy, allocated-but-idle, free, and one that fell off the bus."""
    now = time.time()
    return {
        "agent": "sim",
        "node": "gpu-node-01",
        "batch_id": "fleet-000001",
        "gpus": [
            {
                "uuid": f"GPU-{i}",
                "node": "gpu-node-01",
                "index": i,
                "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0",
            }
            for i in range(4)
        ],
        "samples": [
            {"ts": now, "gpu_uuid": "GPU-0", "util_gpu": 93, "power_w": 525},
            {"ts": now, "gpu_uuid": "GPU-1", "util_gpu": 0, "power_w": 114},
            {"ts": now, "gpu_uuid": "GPU-2", "util_gpu": 0, "power_w": 70},
            {"ts": now, "gpu_uuid": "GPU-3", "util_gpu": 0, "power_w": 60},
        ],
        "events": [
            {
                "ts": now - 5,
                "node": "gpu-node-01",
                "source": "kmsg",
                "kind": "xid",
                "code": 79,
                "pci_bus_id": "0000:1b:00",
                "severity": "critical",
                "raw": "NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, GPU has fallen off the bus.",
            }
        ],
        "jobs": [
            {
                "scheduler": "slurm",
                "job_id": "4242",
                "user": "alice",
                "state": "RUNNING",
                "nodes": ["gpu-node-01"],
            }
        ],
        "allocations": [
            {
                "scheduler": "slurm",
                "job_id": "4242",
                "node": "gpu-node-01",
                "gpu_index": i,
                "start_ts": now - 60,
            }
            for i in (0, 1)
        ],
    }


def _ingest_fleet(client: TestClient, auth: dict[str, str]) -> None:
    r = client.post("/api/v1/ingest", json=fleet_batch(), headers=auth)
    assert r.status_code == 200, r.text


def _correlate(client: TestClient) -> None:
    from correlator.flows import correlate_once

    app = client.app
    correlate_once(app.state.session_factory, settings=app.state.settings)  # type: ignore[attr-defined]


def test_fleet_api_classifies_busy_idle_free_and_failing(
    client: TestClient, auth: dict[str, str]
) -> None:
    _ingest_fleet(client, auth)
    before = client.get("/api/v1/fleet").json()
    # The Xid 79 alone paints nothing: failing means an open incident blames the GPU.
    assert [g["state"] for g in before[0]["gpus"]][3] == "free"
    _correlate(client)
    nodes = client.get("/api/v1/fleet").json()
    states = {g["index"]: (g["state"], g["job_id"]) for g in nodes[0]["gpus"]}
    assert states == {
        0: ("busy", "4242"),
        1: ("idle_allocated", "4242"),
        2: ("free", None),
        3: ("failing", None),  # Xid 79 named its bus id in the kernel's short form
    }


def test_read_endpoints_return_ingested_rows(client: TestClient, auth: dict[str, str]) -> None:
    _ingest_fleet(client, auth)
    assert len(client.get("/api/v1/gpus").json()) == 4
    assert [n["name"] for n in client.get("/api/v1/nodes").json()] == ["gpu-node-01"]
    events = client.get("/api/v1/events", params={"kind": "xid"}).json()
    assert [e["code"] for e in events] == [79] and events[0]["pci_bus_id"] == "0000:1b:00.0"
    assert client.get("/api/v1/jobs").json()[0]["user"] == "alice"
    assert client.get("/api/v1/jobs/4242").json()["state"] == "RUNNING"
    assert client.get("/api/v1/jobs/nope").status_code == 404
    assert client.get("/api/v1/events", params={"kind": "bogus"}).status_code == 422


def test_fleet_page_renders_grid_and_heatmap(client: TestClient, auth: dict[str, str]) -> None:
    _ingest_fleet(client, auth)
    _correlate(client)
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    import json
    import re

    found = re.search(r'id="grid-data">(.*?)</script>', html, re.S)
    assert found is not None and 'data-gpus="4"' in html
    grid = json.loads(found.group(1))
    assert [n[0] for n in grid["nodes"]] == ["gpu-node-01"] and grid["nodes"][0][3] == "bifx"
    assert 'id="heatmap" data-src="/api/v1/fleet/heatmap?hours=1"' in html
    # Plotly (only the heatmap needs it) loads without holding up the page; data comes later.
    assert '<script src="/static/plotly.min.js" defer></script>' in html
    assert "fallen off the bus" in html
    heat = client.get("/api/v1/fleet/heatmap").json()
    assert heat["nodes"] == ["gpu-node-01"] and heat["spans"][0][0][2] == "job 4242 (alice)"
    assert any(v is not None for v in heat["z"][0])
    assert client.get("/static/plotly.min.js").text.startswith("/**")


def test_reads_need_a_token_when_api_tokens_are_set(settings: Settings) -> None:
    from pydantic import SecretStr

    settings.api_tokens = [SecretStr("reader-token")]
    with TestClient(create_app(settings)) as c:
        assert c.get("/api/v1/gpus").status_code == 401
        assert c.get("/api/v1/gpus", headers={"Authorization": "Bearer nope"}).status_code == 403
        assert (
            c.get("/api/v1/gpus", headers={"Authorization": "Bearer reader-token"}).status_code
            == 200
        )
        page = c.get("/", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/"


def test_metrics_and_health_endpoints(client: TestClient, auth: dict[str, str]) -> None:
    _ingest_fleet(client, auth)
    assert client.get("/healthz").text == "ok"
    metrics = client.get("/metrics").text
    assert 'fleetmedic_ingest_batches_total{result="stored"} 1.0' in metrics
    assert "fleetmedic_ingest_samples_total 4.0" in metrics


def test_fleet_cache_reuses_the_classification_for_its_ttl_then_rebuilds(
    settings: Settings, client: TestClient, auth: dict[str, str]
) -> None:
    from web.fleetstate import FleetCache

    _ingest_fleet(client, auth)
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    cache = FleetCache(ttl_s=60)
    with factory() as s:
        first = cache.rows(s, settings=settings, now=time.time())
        _correlate(client)  # Xid 79 becomes an incident: GPU 3 turns failing
        again = cache.rows(s, settings=settings, now=time.time())
        fresh = FleetCache(ttl_s=0).rows(s, settings=settings, now=time.time())
    assert again is first  # within the ttl: the same classification, not rebuilt
    assert [st.value for *_, st in first[1]][3] == "free"
    assert [st.value for *_, st in fresh[1]][3] == "failing"
