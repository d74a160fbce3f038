"""`fleetmedic bench dashboard` runs end to end on a tiny fleet and prints the issue's keys."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from web.cli import app

KEYS = {
    "gpus",
    "hours",
    "history_rows",
    "fleet_page_p50_ms",
    "fleet_page_p95_ms",
    "fleet_api_p95_ms",
    "idle_page_p95_ms",
    "incident_page_p95_ms",
    "job_page_p95_ms",
    "node_page_p95_ms",
    "page_bytes",
    "backend",
}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_bench_dashboard_prints_one_json_line_with_the_issues_keys(
    backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        request.getfixturevalue("pg_database_url")  # skips loudly, or fails in CI, without it
    args = ["bench", "dashboard", "--json", "--gpus", "80", "--hours", "0.02", "--requests", "2"]
    args += ["--backend", backend]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    line = [x for x in result.output.splitlines() if x.startswith("{")]
    assert len(line) == 1
    out = json.loads(line[0])
    assert set(out) >= KEYS
    assert out["gpus"] == 80 and out["history_rows"] == 80 * 7 and out["backend"] == backend
    assert out["page_bytes"] > 1000 and "directly" in out["seeding"]
    # Every benchmark's line says how fast the machine ran a fixed loop before and after.
    assert out["machine_loop_ms_start"] > 0 and out["machine_loop_ms_end"] > 0
