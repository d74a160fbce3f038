"""`fleetmedic bench scale` runs end to end on a tiny fleet and prints exactly the issue's keys
(and the two that every benchmark adds: how fast the machine ran a fixed loop, before and after)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from tests.helpers.services import binary
from web.cli import app

KEYS = {
    "gpus", "backend", "samples_per_s", "ingest_lag_p95_s", "ingest_lag_max_s", "rss_start_mb",
    "rss_end_mb", "disk_bytes_per_sample", "hang_query_ms", "idle_query_ms", "correlator_pass_ms",
}  # fmt: skip
MACHINE_KEYS = {"machine_loop_ms_start", "machine_loop_ms_end"}


def _bench(backend: str, *extra: str) -> dict[str, object]:
    args = ["bench", "scale", "--json", "--gpus", "200", "--interval", "2", "--minutes", "0.1"]
    result = CliRunner().invoke(app, [*args, "--backend", backend, *extra])
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("{")]
    out: dict[str, object] = json.loads(line)
    assert set(out) == KEYS | MACHINE_KEYS
    index = re.search(r"([0-9.]+) are VictoriaMetrics' series index", result.output)
    if backend == "victoriametrics":  # the index's share is said apart, and is part of the whole
        assert index is not None, result.output
        assert 0 < float(index[1]) <= float(out["disk_bytes_per_sample"])  # type: ignore[arg-type]
    else:
        assert index is None
    where = "the leader" if "--correlator-in-leader" in extra else "a child process"
    assert f"correlator in {where}" in result.output
    return out


def _plausible(out: dict[str, object], backend: str) -> None:
    assert (out["gpus"], out["backend"]) == (200, backend)
    # 3 rounds of 200 GPUs in about 7 s: every sample acknowledged, with a bounded lag.
    assert 40 <= float(out["samples_per_s"]) <= 200  # type: ignore[arg-type]
    assert 0 <= float(out["ingest_lag_p95_s"]) <= float(out["ingest_lag_max_s"]) < 30  # type: ignore[arg-type]
    assert float(out["disk_bytes_per_sample"]) > 0 and float(out["rss_end_mb"]) > 50  # type: ignore[arg-type]
    for key in ("hang_query_ms", "idle_query_ms", "correlator_pass_ms"):
        assert float(out[key]) > 0  # type: ignore[arg-type]


@pytest.mark.slow
def test_bench_scale_on_sqlite_prints_the_issues_keys() -> None:
    # The correlator as it ran before correlator_process (the default, on VictoriaMetrics below).
    _plausible(_bench("sqlite", "--correlator-in-leader"), "sqlite")


@pytest.mark.slow
@pytest.mark.integration
def test_bench_scale_on_victoriametrics_prints_the_issues_keys() -> None:
    binary(("victoria-metrics",), "REQUIRE_VICTORIAMETRICS", "victoria-metrics")
    _plausible(_bench("victoriametrics"), "victoriametrics")


def test_a_push_of_two_polls_carries_every_gpu_twice_one_interval_apart() -> None:
    import random

    from benchmarks._scale_load import IDENTITY_NODES, ScaleFleet

    fleet = ScaleFleet(16 * IDENTITY_NODES + 8)
    node = next(iter(fleet.nodes))
    body = json.loads(fleet.body(node, 1000.0, random.Random(1), ticks=2))
    stamps: dict[str, list[float]] = {}
    for s in body["samples"]:
        stamps.setdefault(s["gpu_uuid"], []).append(s["ts"])
    assert len(stamps) == 8 and all(v == [990.0, 1000.0] for v in stamps.values())
    identities = [b for b in fleet.setup_batches(1e9) if b.gpus]
    # the GPU identities go IDENTITY_NODES nodes a batch, every GPU once
    assert len(identities) == 3
    assert sum(len(b.gpus) for b in identities) == len(fleet.sim.gpus)
