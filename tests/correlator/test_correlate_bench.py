"""`fleetmedic bench correlate` runs end to end on a small fleet and reports its figures."""

from __future__ import annotations

import pytest

from benchmarks import correlate


@pytest.mark.slow
def test_correlate_benchmark_reports_throughput_and_latency_on_a_small_fleet() -> None:
    result = correlate.run(["--nodes", "16", "--seconds", "2", "--rate", "200"])
    assert result["history_events"] > 1000 and result["events_per_s"] > 0
    assert result["latency_probes"] > 0 and result["incident_latency_p95_ms"] is not None
    assert result["incidents_written"] > 0
    assert result["live_events_read"] == result["live_events"]  # nothing ingested was lost
