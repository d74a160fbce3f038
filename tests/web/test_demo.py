"""`fleetmedic demo` shows every feature at once: backfilled history gives idle findings, a
heatmap and incidents on the first correlator pass, and an alert reaches the local receiver
that the alerts page links to."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from collector.simulator import DemoFleet
from correlator import service as incidents
from correlator.flows import correlate_once
from timeline import db
from timeline.settings import Settings
from web.app import create_app
from web.cli.demo import alert_receiver, backfill
from web.notify.fakes import HttpReceiver
from web.notify.jobs import build_notifier

pytestmark = [pytest.mark.slow]


def test_demo_backfill_and_local_receiver_show_idle_heatmap_incidents_and_an_alert(
    tmp_path: Path,
) -> None:
    base = Settings(data_dir=tmp_path)
    url = "http://127.0.0.1:1"
    receiver, notify = alert_receiver(base, url)
    assert isinstance(receiver, HttpReceiver)
    try:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path / 'demo.db'}",
            data_dir=tmp_path,
            page_refresh_s=0,
            **notify,
        )  # type: ignore[arg-type]
        assert backfill(settings, DemoFleet(nodes=8, gpus_per_node=8), hours=1.0) > 500
        factory = db.make_sessionmaker(db.make_engine(settings.database_url))
        correlate_once(factory, settings=settings)
        with factory() as s:
            assert incidents.list_idle_findings(s, state="open")  # the idle view has data
            kinds = {(i.kind, i.code) for i in incidents.list_incidents(s, state="open")}
        assert ("xid", 79) in kinds and ("xid", 31) in kinds
        report = build_notifier(factory, settings).run_once()
        assert report.sent > 0 and report.failed == 0
        assert receiver.received and receiver.received[0].path == "/alerts"
        with TestClient(create_app(settings)) as client:
            page = client.get("/notifications").text
            heat = client.get("/api/v1/fleet/heatmap").json()
        assert f'href="{receiver.url}"' in page
        assert len(heat["nodes"]) == 8 and sum(v is not None for v in heat["z"][0]) > 30
    finally:
        receiver.close()
