"""A real Alertmanager (Debian's prometheus-alertmanager) receives our alerts: its API lists
them with the incident's labels, open ones are re-sent, and resolved ones end."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from tests.helpers.services import alertmanager
from tests.web.seed import seed
from timeline.db import unit_of_work
from timeline.settings import Settings
from web.notify.flows import Notifier
from web.notify.jobs import build_sinks
from web.notify.routing import parse_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _ours(url: str) -> dict[str, dict[str, object]]:
    alerts = httpx.get(f"{url}/api/v2/alerts", timeout=5).json()
    return {a["labels"]["fleetmedic_id"]: a for a in alerts if "fleetmedic_id" in a["labels"]}


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_alertmanager_lists_our_alerts_and_ends_resolved_ones(
    session_factory: sessionmaker[Session], migrated_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=migrated_url,
        data_dir=tmp_path,
        idle_min_duration_s=600,
        notify_alertmanager_resend_s=30,
    )
    fleet = seed(session_factory, settings, nodes=8, history_s=1200)
    with alertmanager(tmp_path) as am, httpx.Client(timeout=5) as client:
        config = parse_config(
            {"route": [{"name": "am", "sink": "alertmanager", "to": am}]}, settings=settings
        )
        notifier = Notifier(session_factory, settings, config, build_sinks(settings, client))
        assert notifier.run_once().sent == 2
        listed = _ours(am)
        hw = listed[f"incident:{fleet.failing_incident}"]
        assert hw["labels"]["category"] == "gpu_hardware" and hw["labels"]["severity"] == "critical"
        assert "fallen off the bus" in str(hw["annotations"]["description"])
        assert hw["status"]["state"] == "active"
        assert notifier.run_once(now=time.time() + 31).resent == 2  # re-sent while open
        with unit_of_work(session_factory) as s:
            incidents.resolve_incident(
                s,
                incident_id=fleet.failing_incident,
                ts=time.time() - 1,
                resolution="test: replaced",
                now=time.time(),
            )
        assert notifier.run_once().sent == 1
        deadline = time.monotonic() + 10
        while f"incident:{fleet.failing_incident}" in _ours(am) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _ours(am)
    assert f"incident:{fleet.failing_incident}" not in left  # ended: endsAt in the past
    assert f"incident:{fleet.user_incident}" in left
