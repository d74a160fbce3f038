"""VictoriaMetrics over HTTP: JSON-line import, instant and range queries, raw export.

Every GPU field is one series, `fleetmedic_gpu_<field>{gpu="<uuid>",node="<node>"}`, plus
`fleetmedic_gpu_sample` (1 per stored row) so "a row" keeps its meaning. Writes go through
/api/v1/import as JSON, so label values need no escaping there; selectors in MetricsQL do, and
`selector()` escapes every label value (a node name can be any string the bounds allow).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx
import orjson
from tenacity import (
    retry,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from timeline.errors import StoreUnavailable

log = logging.getLogger(__name__)

PREFIX = "fleetmedic_gpu_"
ROW = "sample"  # the per-row series: value 1 at each sample's time
RETRY_VM_S = 5  # Retry-After when VictoriaMetrics cannot take writes or answer reads


def metric(field: str) -> str:
    """The series name of one sample field."""
    return PREFIX + field


def quote(value: str) -> str:
    """A MetricsQL double-quoted string literal holding `value` exactly."""
    out = value.replace("\\", "\\\\").replace('"', '\\"')
    out = out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{out}"'


def quote_regex(values: Iterable[str]) -> str:
    """A MetricsQL regex literal matching exactly one of `values` (anchored by VM)."""
    escaped = "|".join(_regex_escape(v) for v in sorted(set(values)))
    return quote(escaped)


def _regex_escape(value: str) -> str:
    # RE2 meta characters; Python's re.escape also escapes characters RE2 rejects (e.g. "\ ").
    return "".join("\\" + c if c in r".^$*+?()[]{}|\-" else c for c in value)


def selector(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    among: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """`name{label="v",...,label=~"a|b"}` with every value escaped."""
    parts = [f"{k}={quote(v)}" for k, v in (labels or {}).items()]
    parts += [f"{k}=~{quote_regex(vs)}" for k, vs in (among or {}).items()]
    return f"{name}{{{','.join(parts)}}}"


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code >= 500


class VmClient:
    """Talks to one VictoriaMetrics (single node, or vminsert/vmselect behind one URL)."""

    def __init__(
        self,
        base_url: str,
        *,
        client: httpx.Client,
        attempts: int = 3,
        flush_writes: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client
        self.attempts = attempts
        # VictoriaMetrics makes imported samples searchable within about a second; tests and
        # benchmarks that read right after writing flush (costly: not for production).
        self.flush_writes = flush_writes

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        @retry(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=0.1, max=1.0),
            reraise=True,
        )
        def once() -> httpx.Response:
            response = self.client.request(method, self.base_url + path, **kwargs)
            response.raise_for_status()
            return response

        try:
            return once()
        except httpx.TransportError as exc:
            raise StoreUnavailable(
                f"VictoriaMetrics unreachable: {type(exc).__name__}", RETRY_VM_S
            ) from exc
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code >= 500:
                raise StoreUnavailable(
                    f"VictoriaMetrics answered {exc.response.status_code}", RETRY_VM_S
                ) from exc
            raise

    def import_lines(self, lines: Sequence[dict[str, Any]]) -> None:
        """Write series (metric, values, timestamps in ms) through /api/v1/import."""
        if not lines:
            return
        body = b"\n".join(orjson.dumps(line) for line in lines)
        self._call("POST", "/api/v1/import", content=body)
        if self.flush_writes:
            self.flush()

    def query(self, expr: str, *, at: float) -> list[dict[str, Any]]:
        """An instant query at `at` (seconds); the result vector."""
        response = self._call("POST", "/api/v1/query", data={"query": expr, "time": f"{at:.3f}"})
        return list(orjson.loads(response.content)["data"]["result"])

    def query_range(
        self, expr: str, *, start: float, end: float, step_s: int
    ) -> list[dict[str, Any]]:
        """A range query; the result matrix (VM may align start and end to the step)."""
        data = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s}s"}
        data["nocache"] = "1"
        response = self._call("POST", "/api/v1/query_range", data=data)
        return list(orjson.loads(response.content)["data"]["result"])

    def export(self, match: str, *, start: float, end: float) -> list[dict[str, Any]]:
        """Raw samples of the matching series in [start, end] (JSON lines)."""
        response = self._call(
            "POST",
            "/api/v1/export",
            data={"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"},
        )
        return [orjson.loads(line) for line in response.content.splitlines() if line.strip()]

    def flush(self) -> None:
        """Make what was imported visible to queries now (tests and benchmarks)."""
        self._call("GET", "/internal/force_flush")

    def delete(self, match: str) -> None:
        """Delete the matching series (tests)."""
        self._call("POST", "/api/v1/admin/tsdb/delete_series", data={"match[]": match})
