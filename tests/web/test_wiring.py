"""The server runs the sources the settings switch on, and stores what they see."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from tests.collector.kubernetes.fakeapi import FakeKubeAPI, fixture
from timeline.settings import Settings
from web.app import GC_THRESHOLDS, create_app
from web.wiring import configure_runtime


@pytest.fixture()
def fake_k8s() -> Iterator[FakeKubeAPI]:
    """The faithful fake API server with a GPU node and a running GPU pod."""
    api = FakeKubeAPI()
    api.apply("nodes", fixture("node_gpu.json"))
    api.apply("pods", fixture("pod_gpu_running.json"))
    api.start()
    yield api
    api.stop()


def _wait(client: TestClient, path: str, pred: object, timeout: float = 20.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(path).json()
        if pred(body):  # type: ignore[operator]
            return body
        time.sleep(0.1)
    raise AssertionError(f"{path} never satisfied the condition; last: {body!r}")


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_server_watches_kubernetes_and_stores_pods_and_nodes(
    settings: Settings, fake_k8s: FakeKubeAPI
) -> None:
    settings.kubernetes_enabled = True
    settings.kubernetes_host = fake_k8s.url
    settings.kubernetes_token = SecretStr("test-token")
    settings.kubernetes_verify_ssl = False
    settings.correlator_enabled = False
    with TestClient(create_app(settings, configure=configure_runtime)) as client:
        jobs = _wait(
            client, "/api/v1/jobs", lambda b: any(j["scheduler"] == "kubernetes" for j in b)
        )
        pod = fixture("pod_gpu_running.json")
        job_id = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        assert [j["job_id"] for j in jobs] == [job_id]  # type: ignore[union-attr]
        nodes = _wait(client, "/api/v1/nodes", lambda b: len(b) >= 1)
        assert nodes[0]["name"] == fixture("node_gpu.json")["metadata"]["name"]  # type: ignore[index]
        assert client.app.state.runtime.streams  # type: ignore[attr-defined]


def test_only_telemetry_rollups_and_retention_are_scheduled_when_every_source_is_off(
    settings: Settings,
) -> None:
    settings.correlator_enabled = False
    app = create_app(settings, configure=configure_runtime)
    with TestClient(app):
        assert set(app.state.runtime.jobs) == {"samples:rollup", "samples:retention"}
        assert app.state.runtime.streams == []


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_the_healer_plans_in_observe_mode_right_after_the_correlator_opens_an_incident(
    settings: Settings,
) -> None:
    from tests.web.test_actions_api import _batch

    settings.healer_interval_s = 3600.0  # only the correlator's wake-up can make it run
    app = create_app(settings, configure=configure_runtime)
    agent = {"Authorization": "Bearer agent-secret-token"}
    with TestClient(app) as client:
        assert app.state.runtime.healer is not None
        assert app.state.runtime.healer.fence == app.state.runtime.fence  # leader-only writes
        # The first pass at start-up found nothing; the next one must come from the wake-up.
        _wait(client, "/api/v1/actions", lambda _: app.state.runtime.healer.last is not None)
        assert client.post("/api/v1/ingest", json=_batch(), headers=agent).status_code == 200
        actions = _wait(client, "/api/v1/actions", lambda b: len(b) >= 3)
    assert {(a["kind"], a["state"], a["mode"]) for a in actions} == {  # type: ignore[union-attr]
        ("drain", "planned", "observe"),
        ("recover", "planned", "observe"),
        ("notify", "planned", "observe"),
    }


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_a_started_server_collects_young_objects_less_often(settings: Settings) -> None:
    before = gc.get_threshold()
    try:
        with TestClient(create_app(settings)):
            assert gc.get_threshold() == GC_THRESHOLDS
            assert gc.get_freeze_count() > 0  # start-up's objects left out of collections
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_a_sqlite_server_checkpoints_its_wal_in_the_background_while_it_runs(
    settings: Settings,
) -> None:
    app = create_app(settings)
    ck = app.state.checkpointer
    assert ck is not None and ck._thread is None
    with TestClient(app):
        thread = ck._thread
        assert thread is not None and thread.is_alive()
    assert ck._thread is None and not thread.is_alive()


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_a_sqlite_server_files_staged_samples_in_the_background_while_it_runs(
    settings: Settings,
) -> None:
    from sqlalchemy import func, select

    from tests.web.test_actions_api import _batch
    from timeline import tables as t
    from timeline.db import reading

    app = create_app(settings)
    mover = app.state.stage_mover
    assert mover is not None and mover._thread is None
    mover.max_wait_s = 0.0  # every poll moves what waits
    agent = {"Authorization": "Bearer agent-secret-token"}
    with TestClient(app) as client:
        assert client.post("/api/v1/ingest", json=_batch(), headers=agent).status_code == 200
        deadline = time.monotonic() + 10
        while mover.moved == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        thread = mover._thread
        assert thread is not None and thread.is_alive()
    assert mover._thread is None and not thread.is_alive()
    with reading(app.state.session_factory) as s:
        filed = s.execute(select(func.count()).select_from(t.samples)).scalar_one()
        staged = s.execute(select(func.count()).select_from(t.samples_staged)).scalar_one()
    assert filed == mover.moved > 0 and staged == 0
