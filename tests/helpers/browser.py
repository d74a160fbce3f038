"""Playwright for Python driving Debian's Chromium (never a browser Playwright downloads)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """Debian's Chromium; skips loudly (fails under REQUIRE_CHROMIUM=1) when it is missing."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("REQUIRE_CHROMIUM") == "1":
            pytest.fail(
                "REQUIRE_CHROMIUM=1 but no chromium on PATH (tests/system_deps.sh installs it)"
            )
        pytest.skip("SKIPPED (no Chromium): install Debian's chromium to run the browser tests")
    return path


@contextmanager
def browser() -> Iterator[Any]:
    """A Playwright Chromium browser on the system binary."""
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("REQUIRE_CHROMIUM") == "1":
            pytest.fail(
                "REQUIRE_CHROMIUM=1 but playwright is not installed (pip install -e .[dev])"
            )
        pytest.skip("SKIPPED (no playwright): pip install -e '.[dev]'")
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def artifacts_dir() -> Path:
    """Where screenshots go: $FLEETMEDIC_ARTIFACTS, else test-artifacts/ (git-ignored)."""
    root = Path(
        os.environ.get("FLEETMEDIC_ARTIFACTS")
        or Path(__file__).resolve().parents[2] / "test-artifacts"
    )
    out = root / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out


def headless(chromium: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium's own headless mode on one URL (--dump-dom, --screenshot), 5 s virtual time."""
    cmd = [chromium, *CHROMIUM_ARGS, "--hide-scrollbars", "--virtual-time-budget=5000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=True)
