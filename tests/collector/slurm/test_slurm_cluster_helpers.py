"""The skip/fail decision of the real-Slurm fixture and the cluster script's usage errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.collector.slurm import live


def test_not_root_gives_a_visible_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live.os, "geteuid", lambda: 1000)
    reason = live.why_no_slurm()
    assert reason is not None and "root" in reason


def test_cluster_script_rejects_unknown_commands() -> None:
    proc = subprocess.run(
        ["bash", str(live.SCRIPT), "frobnicate"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_cluster_script_status_of_a_missing_cluster_is_nonzero(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(live.SCRIPT), "status", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
