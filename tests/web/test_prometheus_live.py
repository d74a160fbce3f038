"""A real Prometheus (Debian's `prometheus`) scrapes our /metrics and a PromQL query returns
our series: GPUs by state and open incidents by category."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.helpers.services import prometheus, serve_app
from tests.web.seed import seed
from timeline.settings import Settings
from web.app import create_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _query(url: str, promql: str) -> list[dict[str, object]]:
    r = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=5)
    r.raise_for_status()
    return list(r.json()["data"]["result"])


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_prometheus_scrapes_metrics_and_promql_returns_our_series(
    session_factory: sessionmaker[Session], migrated_url: str, tmp_path: Path
) -> None:
    settings = Settings(database_url=migrated_url, data_dir=tmp_path, idle_min_duration_s=600)
    seed(session_factory, settings, nodes=8, history_s=1200)
    with (
        serve_app(create_app(settings)) as base,
        prometheus(tmp_path, target=base.removeprefix("http://")) as prom,
    ):
        deadline = time.monotonic() + 30
        result: list[dict[str, object]] = []
        while not result and time.monotonic() < deadline:
            result = _query(prom, 'fleetmedic_gpus{state="failing"}')
            time.sleep(0.5)
        assert result, "Prometheus never returned fleetmedic_gpus"
        assert result[0]["value"][1] == "1"  # type: ignore[index]
        by_category = {
            r["metric"]["category"]: r["value"][1]  # type: ignore[index]
            for r in _query(prom, "fleetmedic_open_incidents")
        }
        total = _query(prom, "sum(fleetmedic_gpus)")
    assert by_category == {"gpu_hardware": "1", "user_code": "1"}
    assert total[0]["value"][1] == "64"  # type: ignore[index]
