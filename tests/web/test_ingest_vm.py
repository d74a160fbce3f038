"""Ingest with `samples_backend = "victoriametrics"` against the real binary: samples go to
VictoriaMetrics and everything else to SQL; while VictoriaMetrics is down the batch gets 503 with
Retry-After, nothing of it is kept, and the agent's retry stores all of it once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.helpers.services import victoriametrics
from tests.web.test_ingest import batch, count
from timeline import queries, samples
from timeline.settings import Settings
from timeline.vm_client import VmClient
from web.app import create_app
from web.notify.fakes import free_port

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _restore_store() -> Iterator[None]:
    """The app picks the process's sample store; put the one before back afterwards."""
    old = samples.store()
    yield
    samples.use(old)


def _vm_samples(url: str) -> int:
    with httpx.Client(timeout=10) as c:
        vm = VmClient(url, client=c)
        vm.flush()
        lines = vm.export('{__name__="fleetmedic_gpu_util_gpu"}', start=0.0, end=4e9)
    return sum(len(line["values"]) for line in lines)


def test_samples_go_to_victoriametrics_and_the_rest_to_sql(
    settings: Settings, vm_url: str, auth: dict[str, str], session: Session
) -> None:
    on_vm = settings.model_copy(
        update={"samples_backend": "victoriametrics", "victoriametrics_url": vm_url}
    )
    with TestClient(create_app(on_vm)) as client:
        r = client.post("/api/v1/ingest", json=batch("b-vm-0001"), headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["samples"] == 4
        assert _vm_samples(vm_url) == 4
        latest = {g["uuid"]: g["util_gpu"] for g in queries.latest_gpu_samples(session)}
    assert latest == {f"GPU-{i}": 97.0 for i in range(4)}  # read back through the VM store
    assert count(session, "samples") == 0 and count(session, "events") == 1


def test_victoriametrics_down_is_503_with_retry_after_and_the_retry_loses_nothing(
    settings: Settings, auth: dict[str, str], session: Session, tmp_path: Path
) -> None:
    port = free_port()
    down = settings.model_copy(
        update={
            "samples_backend": "victoriametrics",
            "victoriametrics_url": f"http://127.0.0.1:{port}",
            "victoriametrics_timeout_s": 2.0,
        }
    )
    body = batch("b-vm-0002")
    with TestClient(create_app(down)) as client:
        r = client.post("/api/v1/ingest", json=body, headers=auth)
        assert r.status_code == 503, r.text
        assert int(r.headers["Retry-After"]) > 0
        assert "VictoriaMetrics" in r.json()["detail"]
        # Nothing of the batch was kept: its id is free for the retry.
        assert (count(session, "ingest_batches"), count(session, "events")) == (0, 0)
        with victoriametrics(tmp_path, port=port) as url:
            r = client.post("/api/v1/ingest", json=body, headers=auth)
            assert r.status_code == 200, r.text
            assert r.json()["duplicate"] is False
            assert _vm_samples(url) == 4
    assert (count(session, "ingest_batches"), count(session, "events")) == (1, 1)
