"""The dashboard in real headless Chromium (Playwright, Debian's binary) on a seeded fleet:
every page loads without console errors or running hostile script, filters work, links
resolve, a viewer sees no approve button, and each page is saved as a screenshot."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.helpers.browser import artifacts_dir, browser
from tests.helpers.services import serve_app
from tests.web.seed import HOSTILE_JOB, Seeded, seed
from timeline.settings import Settings
from web.app import create_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]
VIEWER, ADMIN = "viewer:vera:viewer-token-123", "admin:ada:admin-token-456"


@pytest.fixture()
def site(
    migrated_url: str, session_factory: sessionmaker[Session], tmp_path: Path
) -> Iterator[tuple[str, Seeded]]:
    settings = Settings(
        database_url=migrated_url,
        page_refresh_s=0,
        data_dir=tmp_path,
        idle_min_duration_s=600,
        api_tokens=[VIEWER, ADMIN],
    )  # type: ignore[list-item]
    fleet = seed(session_factory, settings, nodes=12, history_s=1800)
    with serve_app(create_app(settings)) as base:
        yield base, fleet


def _login(page: Any, base: str, token: str) -> None:
    page.goto(f"{base}/login")
    page.fill("input[name=token]", token.rsplit(":", 1)[1])
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{base}/")


def _visit(page: Any, url: str, errors: list[str]) -> None:
    before = len(errors)
    page.goto(url, wait_until="networkidle")
    assert page.evaluate("window.__xss") is None, f"hostile script ran on {url}"
    assert len(errors) == before, f"console errors on {url}: {errors[before:]}"


def _heatmap_grid_and_filters(page: Any, base: str) -> None:
    """The fleet page's Plotly heatmap draws, a click on the grid opens a node, a filter narrows."""
    # Plotly drew the heatmap and the charts (its script ran; data came from the API).
    page.goto(base + "/", wait_until="networkidle")
    page.wait_for_selector("#heatmap .main-svg", timeout=15_000)
    # The grid is drawn on canvas; a click on a GPU opens its node.
    canvas = page.locator("canvas.grid").first
    assert canvas.bounding_box()["height"] > 10
    canvas.click(position={"x": 155, "y": 8})
    page.wait_for_url(f"{base}/nodes/**")
    # Filters: choosing a user narrows the grid.
    page.goto(base + "/", wait_until="networkidle")
    total = int(page.get_attribute("#fleet-grid", "data-gpus") or 0)
    page.select_option("#fleet-filters select[name=user]", "carol")
    page.click("#fleet-filters button[type=submit]")
    page.wait_for_url("**user=carol**")
    narrowed = int(page.get_attribute("#fleet-grid", "data-gpus") or 0)
    assert 0 < narrowed < total


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_every_page_in_chromium_filters_links_and_screenshots(site: tuple[str, Seeded]) -> None:
    base, fleet = site
    shots = artifacts_dir()
    pages = {
        "fleet": "/",
        "idle": "/idle",
        "failing": "/failing",
        "incidents": "/incidents",
        "incident": f"/incidents/{fleet.failing_incident}",
        "jobs": "/jobs",
        "job": f"/jobs/{fleet.user_fault_job}",
        "hostile-job": f"/jobs/{HOSTILE_JOB}",
        "nodes": "/nodes",
        "node": f"/nodes/{fleet.nodes[0]}",
        "remediation": "/remediation",
        "alerts": "/notifications",
    }
    with browser() as b:
        page = b.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        _login(page, base, VIEWER)
        links: set[str] = set()
        for name, path in pages.items():
            _visit(page, base + path, errors)
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
            links |= set(
                page.eval_on_selector_all(
                    "a[href^='/']", "els => els.map(e => e.getAttribute('href'))"
                )
            )
            assert page.locator("button.approve").count() == 0  # a viewer never sees one
        _heatmap_grid_and_filters(page, base)
        for href in sorted(links - {"/docs", "/metrics", "/login"}):
            answer = page.request.get(base + href.split("#")[0])
            assert answer.status == 200, href
        assert not errors, errors
        # Times show in the viewer's time zone.
        tokyo = b.new_context(timezone_id="Asia/Tokyo", locale="en-US").new_page()
        _login(tokyo, base, VIEWER)
        tokyo.goto(f"{base}/incidents/{fleet.failing_incident}", wait_until="networkidle")
        shown, ts = tokyo.eval_on_selector(
            "time[data-ts]", "t => [t.textContent, Number(t.dataset.ts)]"
        )
        utc_hour = time.gmtime(ts).tm_hour
        assert f"{(utc_hour + 9) % 24 % 12 or 12}:" in shown and "UTC" not in shown
    assert (shots / "fleet.png").stat().st_size > 20_000


def _planned_action(factory: sessionmaker[Session], fleet: Seeded) -> int:
    """A drain waiting for approval, through the healer's own service."""
    import importlib

    from timeline.db import unit_of_work

    models = importlib.import_module("healer.models")
    service = importlib.import_module("healer.service")
    action = models.Action(
        key=f"test-drain-{fleet.failing_incident}",
        kind="drain",
        mode="approval",
        scheduler="slurm",
        node=fleet.nodes[0],
        incident_id=fleet.failing_incident,
        reason="fleetmedic: Xid 79",
    )
    with unit_of_work(factory) as s:
        assert service.insert_action(s, action=action, now=time.time())
    return int(action.id)


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_an_admin_approves_a_planned_action_and_a_viewer_sees_no_button(
    site: tuple[str, Seeded], session_factory: sessionmaker[Session]
) -> None:
    base, fleet = site
    action_id = _planned_action(session_factory, fleet)
    page_path = f"/incidents/{fleet.failing_incident}"
    with browser() as b:
        viewer = b.new_page()
        _login(viewer, base, VIEWER)
        viewer.goto(base + page_path)
        assert viewer.locator(f"tr[data-action='{action_id}']").count() == 1
        assert viewer.locator("button.approve").count() == 0
        admin = b.new_context().new_page()
        _login(admin, base, ADMIN)
        admin.goto(base + page_path)
        admin.click(f"tr[data-action='{action_id}'] button.approve")
        admin.wait_for_url(base + page_path)
        state = admin.locator(f"tr[data-action='{action_id}'] td").nth(3).inner_text()
        admin.screenshot(path=str(artifacts_dir() / "incident-approved.png"), full_page=True)
    assert state == "approved"
