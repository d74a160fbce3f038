"""The notifier on a real store (both backends): one delivery per incident change, route and
recipient; owners get their own job's explanation; resolved messages; failures visible on the
page and /metrics; the leadership fence guards every recording transaction."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from tests.web.seed import seed
from timeline.db import unit_of_work
from timeline.settings import Settings
from web.app import create_app
from web.notify import service as notify
from web.notify.fakes import HttpReceiver
from web.notify.flows import Notifier, RateLimiter
from web.notify.jobs import build_sinks
from web.notify.routing import parse_config


def _notifier(
    factory: sessionmaker[Session], settings: Settings, rx: HttpReceiver, client: httpx.Client
) -> Notifier:
    config = parse_config(
        {
            "route": [
                {
                    "name": "oncall",
                    "sink": "webhook",
                    "to": rx.url + "/oncall",
                    "severities": ["critical"],
                },
                {"name": "all", "sink": "slack", "to": rx.url + "/slack"},
            ],
            "owners": {"enabled": True, "sink": "slack"},
            "users": {"alice": {"slack": rx.url + "/alice"}, "dave": {"slack": rx.url + "/dave"}},
        },
        settings=settings,
    )
    return Notifier(factory, settings, config, build_sinks(settings, client))


def _paths(rx: HttpReceiver) -> list[str]:
    return sorted(r.path for r in rx.received)


def test_each_change_is_sent_once_per_route_and_owners_hear_about_their_job(
    session_factory: sessionmaker[Session], migrated_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=migrated_url, data_dir=tmp_path, idle_min_duration_s=600, notify_backoff_s=0.01
    )
    fleet = seed(session_factory, settings, nodes=8, history_s=1200)
    fenced: list[int] = []
    with HttpReceiver() as rx, httpx.Client() as client:
        notifier = _notifier(session_factory, settings, rx, client)
        first = notifier.run_once(fence=lambda s: fenced.append(1))
        # Xid 79 (critical): oncall + slack; Xid 31 (user's): slack only; owners of jobs hit.
        assert first.failed == 0 and first.sent == first.planned > 0 and fenced
        paths = _paths(rx)
        assert paths.count("/oncall") == 1 and "/alice" in paths and "/dave" in paths
        owner = next(r.body for r in rx.received if r.path == "/dave")
        assert "Your job" in owner["text"]
        again = notifier.run_once()
        assert again.planned == 0 and again.sent == 0 and len(rx.received) == len(paths)
        with unit_of_work(session_factory) as s:
            incidents.resolve_incident(
                s,
                incident_id=fleet.failing_incident,
                ts=time.time(),
                resolution="test: GPU replaced",
                now=time.time(),
            )
        resolved = notifier.run_once()
        assert resolved.sent == 2  # oncall and slack; owners hear only why their job died
        last = [r for r in rx.received if r.path == "/oncall"][-1].body
        assert last["notices"][0]["change"] == "resolved"


def test_failed_deliveries_are_retried_then_shown_on_the_page_and_in_metrics(
    session_factory: sessionmaker[Session], migrated_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=migrated_url,
        data_dir=tmp_path,
        idle_min_duration_s=600,
        notify_backoff_s=0.0,
        notify_retry_attempts=2,
        notify_max_attempts=2,
    )
    seed(session_factory, settings, nodes=8, history_s=1200)
    with HttpReceiver() as rx, httpx.Client() as client:
        rx.fail_next(10_000)
        notifier = _notifier(session_factory, settings, rx, client)
        assert notifier.run_once().failed > 0
        notifier.run_once(now=time.time() + 60)
    with session_factory() as s:
        rows = notify.list_deliveries(s)
    assert rows and all(d.status == "failed" and d.attempts == 2 for d in rows)
    assert all("HTTP 503" in (d.last_error or "") for d in rows)
    with TestClient(create_app(settings)) as c:
        page = c.get("/notifications").text
        metrics = c.get("/metrics").text
    assert 'data-status="failed"' in page
    assert 'fleetmedic_notification_deliveries{sink="slack",status="failed"}' in metrics
    assert 'fleetmedic_notification_failures_total{sink="webhook"} 2.0' in metrics


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_a_fence_that_refuses_records_nothing_as_sent(
    session_factory: sessionmaker[Session], migrated_url: str, tmp_path: Path
) -> None:
    settings = Settings(database_url=migrated_url, data_dir=tmp_path, idle_min_duration_s=600)
    seed(session_factory, settings, nodes=8, history_s=1200)

    def stale_leader(_: Session) -> None:
        raise PermissionError("not the leader any more")

    with HttpReceiver() as rx, httpx.Client() as client:
        with pytest.raises(PermissionError):
            _notifier(session_factory, settings, rx, client).run_once(fence=stale_leader)
        assert rx.received == []
    with session_factory() as s:
        assert notify.list_deliveries(s) == []


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_idle_nudges_are_off_by_default_and_reach_the_owner_once_when_on(
    session_factory: sessionmaker[Session], migrated_url: str, tmp_path: Path
) -> None:
    settings = Settings(database_url=migrated_url, data_dir=tmp_path, idle_min_duration_s=600)
    fleet = seed(session_factory, settings, nodes=8, history_s=1500)
    config = {
        "owners": {"enabled": True, "sink": "slack"},
        "users": {fleet.idle_user: {"slack": "/carol"}},
    }
    with HttpReceiver() as rx, httpx.Client() as client:
        config["users"][fleet.idle_user]["slack"] = rx.url + "/carol"  # type: ignore[index]
        off = Notifier(
            session_factory,
            settings,
            parse_config(config, settings=settings),
            build_sinks(settings, client),
        )
        off.run_once()
        assert not [r for r in rx.received if r.body["text"].startswith("Idle GPU")]
        on_settings = settings.model_copy(update={"notify_idle_nudge_hours": 0.1})
        on = Notifier(
            session_factory,
            on_settings,
            parse_config(config, settings=on_settings),
            build_sinks(on_settings, client),
        )
        on.run_once()
        on.run_once()
        nudges = [r for r in rx.received if r.body["text"].startswith("Idle GPU")]
    assert len(nudges) == 1 and nudges[0].path == "/carol"  # one message for carol's GPUs


def test_a_route_over_its_rate_limit_defers_the_rest_to_a_later_pass() -> None:
    limiter = RateLimiter(per_minute=2)
    assert limiter.allow("r", 100.0) and limiter.allow("r", 101.0)
    assert not limiter.allow("r", 130.0)  # third in the same minute waits
    assert limiter.allow("other", 130.0)  # limits are per route
    assert limiter.allow("r", 161.0)  # the first one aged out


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_the_servers_notifier_job_is_fenced_by_the_leader_lease(
    session_factory: sessionmaker[Session], migrated_url: str, tmp_path: Path
) -> None:
    from timeline.errors import StaleLeader
    from web.runtime import ServerRuntime
    from web.wiring import configure_runtime

    routes = tmp_path / "routes.toml"
    with HttpReceiver() as rx:
        routes.write_text(f'[[route]]\nname = "all"\nsink = "webhook"\nto = "{rx.url}/all"\n')
        settings = Settings(
            database_url=migrated_url,
            data_dir=tmp_path,
            idle_min_duration_s=600,
            notify_enabled=True,
            notify_routes_file=routes,
            correlator_enabled=False,
        )
        seed(session_factory, settings, nodes=8, history_s=1200)
        runtime = ServerRuntime(session_factory)
        configure_runtime(runtime, settings)
        with pytest.raises(StaleLeader):  # never led: the plan transaction is refused
            runtime.jobs["notifier"]()
        assert rx.received == []
    with session_factory() as s:
        assert notify.list_deliveries(s) == []
