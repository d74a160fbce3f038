"""Prometheus source: GPU telemetry read from a site's Prometheus that scrapes dcgm-exporter.

Where a site already runs Prometheus with dcgm-exporter, the server queries it (PromQL over
HTTP) instead of every agent scraping the exporter a second time. The series are the exporter's
own, so the dcgm-exporter field mapping of collector/parse/dcgm.py applies unchanged, and one
DcgmSource per node turns them into samples, GPU identities, events and allocations exactly as
an agent's scrape would. Prometheus down, an answer that is not the API's JSON, and NaN values
are counted in the source's health; none of them raises.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

from collector.base import Observations
from collector.dcgm import DcgmSource
from collector.health import SourceHealth, http_ok
from collector.parse.dcgm import DcgmRow, group_by_gpu
from timeline.bounds import Name255
from timeline.settings import Settings

_NODE = TypeAdapter(Name255)  # a node name the store accepts (a label can be anything)


class PrometheusSource:
    """Polled source over one Prometheus HTTP API; the HTTP client and clock are injected."""

    name = "prometheus"

    def __init__(
        self,
        *,
        url: str,
        client: httpx.Client,
        clock: Callable[[], float] = time.time,
        selector: str = '{__name__=~"DCGM_.+"}',
        node_label: str = "Hostname",
        timeout_s: float = 10.0,
        health: SourceHealth | None = None,
    ) -> None:
        self.url, self.client, self.clock = url.rstrip("/"), client, clock
        self.selector, self.node_label, self.timeout_s = selector, node_label, timeout_s
        self.health = health or SourceHealth("prometheus")
        self._nodes: dict[str, DcgmSource] = {}  # per node: the previous values, for changes

    def collect(self) -> Observations:
        """Every node's observations together (see collect_by_node)."""
        obs = Observations()
        for part in self.collect_by_node().values():
            obs.extend(part)
        return obs

    def collect_by_node(self) -> dict[str, Observations]:
        """Query once; node -> what its GPUs reported. Empty when Prometheus fails (counted)."""
        ts = self.clock()
        result = self._query(ts)
        if result is None:
            return {}
        by_node: dict[str, list[DcgmRow]] = {}
        for item in result:
            row = self._row(item)
            if row is not None:
                by_node.setdefault(row[0], []).append(row[1])
        out = {}
        for node, rows in by_node.items():
            source = self._nodes.get(node)
            if source is None:
                source = self._nodes[node] = DcgmSource(  # its client is never used here
                    node=node, client=self.client, clock=self.clock, health=self.health
                )
            gpus = group_by_gpu(rows)
            if gpus:
                out[node] = source.observe_gpus(gpus, ts=ts)
        return out

    def _query(self, ts: float) -> list[Any] | None:
        resp = http_ok(
            self.health,
            lambda: self.client.post(
                f"{self.url}/api/v1/query",
                data={"query": self.selector, "time": f"{ts:.3f}"},
                timeout=self.timeout_s,
            ),
        )
        if resp is None:
            return None
        try:
            body = resp.json()
            result = body["data"]["result"]
            if body.get("status") != "success" or not isinstance(result, list):
                raise ValueError("not a successful vector")
        except (ValueError, KeyError, TypeError) as exc:
            self.health.parse_failure("bad_response", f"{type(exc).__name__}: {resp.text[:200]}")
            return None
        return result

    def _row(self, item: Any) -> tuple[str, DcgmRow] | None:
        """(node, row) of one vector element; None (counted) when it is not usable."""
        try:
            labels = {str(k): str(v) for k, v in item["metric"].items()}
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            self.health.parse_failure("bad_series", repr(item)[:200])
            return None
        name = labels.pop("__name__", "")
        if math.isnan(value) or math.isinf(value):
            self.health.parse_failure("nan_value", name)
            return None
        node = labels.get(self.node_label) or labels.get("instance", "").rsplit(":", 1)[0]
        try:
            node = _NODE.validate_python(node)
        except ValidationError:
            node = ""
        if not node:
            self.health.parse_failure("bad_node_label", name)
            return None
        return node, DcgmRow(name, labels, value)


def build_prometheus_source(settings: Settings) -> PrometheusSource:
    """The source as the server's settings describe it (`prometheus_*`)."""
    return PrometheusSource(
        url=settings.prometheus_url,
        client=httpx.Client(),
        selector=settings.prometheus_selector,
        node_label=settings.prometheus_node_label,
        timeout_s=settings.prometheus_timeout_s,
    )
