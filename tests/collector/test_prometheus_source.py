"""The Prometheus source: a real Prometheus (Debian's `prometheus`) scrapes served dcgm-exporter
recordings, and what the source reads back through PromQL is what an agent's scrape of the same
recordings gives; Prometheus down, garbage answers and NaN values are counted, never raised."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from collector.base import Observations
from collector.dcgm import DcgmSource
from collector.prometheus import PrometheusSource
from tests.helpers.services import prometheus, serve_app
from timeline import tables as t
from web.runtime import append_by_node

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dcgm"
# Two real recordings of two hosts: an RTX 4000 Ada with pod labels, an H100 with MIG instances.
RECORDINGS = ("lke_rtx4000ada_pod_labels.prom", "issue512_h100_mig_prof.prom")
NODES = ("lke529760-766837-0a634ab30000", "gsrh100-074")


def _exposition() -> str:
    """Both recordings as one exposition: HELP/TYPE lines dropped so none is repeated."""
    lines = []
    for name in RECORDINGS:
        text = (FIXTURES / name).read_text()
        lines += [line for line in text.splitlines() if line and not line.startswith("#")]
    return "\n".join(lines) + "\n"


def _agent_view(text: str, node: str, ts: float) -> Observations:
    """What an agent on `node` scraping this text itself would send (its node's GPUs only)."""
    own = "\n".join(line for line in text.splitlines() if f'Hostname="{node}"' in line) + "\n"
    return DcgmSource(node=node, client=httpx.Client()).observe(own, ts=ts)


def _dump(obs: Observations) -> dict[str, Any]:
    return {
        "samples": sorted((s.model_dump() for s in obs.samples), key=lambda d: d["gpu_uuid"]),
        "gpus": sorted((g.model_dump() for g in obs.gpus), key=lambda d: d["uuid"]),
        "allocations": sorted(a.model_dump_json() for a in obs.allocations),
        "events": sorted(e.model_dump_json() for e in obs.events),
    }


@pytest.mark.integration
@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_source_reads_through_prometheus_what_the_recordings_hold(
    session_factory: sessionmaker[Session], migrated_url: str, tmp_path: Path
) -> None:
    text = _exposition()

    async def metrics(_: Any) -> PlainTextResponse:
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    exporter = Starlette(routes=[Route("/metrics", metrics)])
    with (
        serve_app(exporter) as base,
        prometheus(tmp_path, target=base.removeprefix("http://")) as prom,
        httpx.Client() as client,
    ):
        now = [time.time()]
        deadline, got = time.monotonic() + 30, {}
        while set(got) != set(NODES) and time.monotonic() < deadline:
            time.sleep(0.5)
            now[0] = time.time()
            # A fresh source each try: its first read, like an agent's first scrape.
            source = PrometheusSource(url=prom, client=client, clock=lambda: now[0])
            got = source.collect_by_node()
        assert set(got) == set(NODES), f"Prometheus never returned both hosts: {list(got)}"
        for node in NODES:
            assert _dump(got[node]) == _dump(_agent_view(text, node, now[0]))
        assert got[NODES[0]].samples[0].power_w == 40.979  # the recording's own value
        stored = append_by_node(session_factory, source=source)
    assert source.health.total_errors() == 0 and source.health.total_parse_failures() == 0
    with session_factory() as s:
        nodes = s.execute(select(t.gpus.c.node, t.gpus.c.uuid)).all()
    assert stored > 0 and {n for n, _ in nodes} == set(NODES)


def _source(handler: Any) -> PrometheusSource:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return PrometheusSource(url="http://prom.invalid:9090", client=client, clock=lambda: 1000.0)


def _vector(*items: dict[str, Any]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": list(items)}}


GOOD = {
    "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "UUID": "GPU-1", "gpu": "0", "Hostname": "n1"},
    "value": [1000.0, "87"],
}


def test_prometheus_down_or_failing_is_counted_and_yields_nothing() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    source = _source(down)
    assert source.collect_by_node() == {} and source.collect().is_empty()
    assert source.health.errors["http_error"] == 2

    failing = _source(lambda r: httpx.Response(503, text="overloaded"))
    assert failing.collect_by_node() == {}
    assert failing.health.errors["http_503"] == 1


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not json</html>",
        b'{"status": "error", "errorType": "bad_data", "error": "parse error"}',
        b'{"status": "success", "data": {"result": "not a list"}}',
        b"[1, 2, 3]",
    ],
)
def test_garbage_answers_are_counted_and_never_raise(body: bytes) -> None:
    source = _source(lambda r: httpx.Response(200, content=body))
    assert source.collect_by_node() == {}
    assert source.health.parse_failures["bad_response"] == 1


def test_nan_values_and_broken_series_are_counted_and_the_good_ones_kept() -> None:
    nan = {**GOOD, "metric": {**GOOD["metric"], "__name__": "DCGM_FI_DEV_POWER_USAGE"}}
    nan["value"] = [1000.0, "NaN"]
    bad_node = {**GOOD, "metric": {**GOOD["metric"], "Hostname": "a\x00b"}}
    items = [GOOD, nan, {"metric": {}}, {"value": [1, "x"]}, "junk", bad_node]
    source = _source(lambda r: httpx.Response(200, json=_vector(*items)))
    got = source.collect_by_node()
    assert list(got) == ["n1"]
    (sample,) = got["n1"].samples
    assert (sample.gpu_uuid, sample.util_gpu, sample.power_w, sample.ts) == (
        "GPU-1",
        87.0,
        None,
        1000.0,
    )
    assert source.health.parse_failures["nan_value"] == 1
    assert source.health.parse_failures["bad_series"] == 3
    assert source.health.parse_failures["bad_node_label"] == 1


def test_without_the_node_label_the_instance_host_names_the_node() -> None:
    plain = {**GOOD, "metric": {k: v for k, v in GOOD["metric"].items() if k != "Hostname"}}
    plain["metric"]["instance"] = "gpu-07.example:9400"
    source = _source(lambda r: httpx.Response(200, json=_vector(plain)))
    assert list(source.collect_by_node()) == ["gpu-07.example"]
