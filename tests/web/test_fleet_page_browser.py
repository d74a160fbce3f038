"""The fleet page in a real headless Chromium: the grid renders and Plotly's script runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.web.test_read_api import fleet_batch
from web.app import create_app  # noqa: F401  (the live_server fixture builds the app)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("REQUIRE_CHROMIUM") == "1":
            pytest.fail(
                "REQUIRE_CHROMIUM=1 but no chromium on PATH (tests/system_deps.sh installs it)"
            )
        pytest.skip("SKIPPED (no Chromium): install chromium to run the browser tests")
    return path


def _headless(chromium: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--virtual-time-budget=5000", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=True)


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_fleet_page_renders_in_chromium_with_plotly_running(
    live_server: str, auth: dict[str, str], tmp_path: Path
) -> None:
    chromium = _chromium()
    r = httpx.post(f"{live_server}/api/v1/ingest", json=fleet_batch(), headers=auth)
    assert r.status_code == 200, r.text
    dom = _headless(chromium, "--dump-dom", f"{live_server}/").stdout
    assert dom.count('class="gpu"') == 4
    assert 'data-state="failing"' in dom
    # Plotly adds these nodes only when its script ran and drew the heatmap.
    assert "js-plotly-plot" in dom and "main-svg" in dom
    shot = tmp_path / "fleet.png"
    _headless(chromium, "--window-size=1280,900", f"--screenshot={shot}", f"{live_server}/")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
