"""GPU samples in VictoriaMetrics: written through its import API, read through MetricsQL.

The answers match the SQL store's on the same samples (tests/timeline/test_samples_vm.py pins
it), at VictoriaMetrics' millisecond time precision. Windows [since, until] are inclusive like
the SQL ones: a rollup at `until` over (until - d, until] with d one millisecond longer.
Events, jobs, incidents and actions stay in the SQL store.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from timeline.models import Sample
from timeline.vm_client import PREFIX, ROW, VmClient, metric, quote, selector

FIELDS = tuple(f for f in Sample.model_fields if f not in ("ts", "gpu_uuid", "extra"))
FLOAT_FIELDS = frozenset(
    {"util_gpu", "util_mem", "mem_used_mb", "mem_total_mb", "power_w", "temp_gpu", "temp_mem",
     "sm_clock_mhz", "energy_mj"}
)  # fmt: skip
BOOL_FIELDS = frozenset({"remap_pending", "remap_failure"})
# Above this many GPUs a query reads the whole fleet and filters here: a regex of 100k uuids
# would pass VictoriaMetrics' query length limit (16 KiB by default).
FILTER_MAX = 100

Stats = dict[str, dict[str, float]]


def _window(since: float, until: float) -> str:
    return f"[{max(round((until - since) * 1000), 0) + 1}ms]"


def _typed(field: str, value: float) -> Any:
    if field in BOOL_FIELDS:
        return value != 0.0
    if field in FLOAT_FIELDS:
        return value
    return int(value)


class VmSampleStore:
    """Samples in VictoriaMetrics; every read is one or a few MetricsQL queries."""

    def __init__(self, client: VmClient, *, latest_lookback_s: float = 3600.0) -> None:
        self.vm = client
        self.latest_lookback_s = latest_lookback_s

    # --- writes -----------------------------------------------------------------------
    def append(self, *, node: str, samples: Sequence[Sample]) -> int:
        """Write samples as series (one JSON line per GPU and field); StoreUnavailable on outage."""
        series: dict[tuple[str, str], tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
        for s in samples:
            ms = round(s.ts * 1000)
            row = s.__dict__
            for field in (ROW, *FIELDS):
                value = 1 if field == ROW else row[field]
                if value is None:
                    continue
                values, stamps = series[(s.gpu_uuid, field)]
                values.append(float(value))
                stamps.append(ms)
        lines = [
            {
                "metric": {"__name__": metric(field), "gpu": gpu, "node": node},
                "values": values,
                "timestamps": stamps,
            }
            for (gpu, field), (values, stamps) in series.items()
        ]
        self.vm.import_lines(lines)
        return len(samples)

    # --- reads ------------------------------------------------------------------------
    def _by_gpu(self, expr: str, *, at: float, uuids: set[str] | None) -> dict[str, float]:
        out = {}
        for r in self.vm.query(expr, at=at):
            gpu = r["metric"].get("gpu")
            if gpu is not None and (uuids is None or gpu in uuids):
                out[gpu] = float(r["value"][1])
        return out

    def _sel(self, field: str, uuids: set[str] | None, node: str | None = None) -> str:
        among = {"gpu": sorted(uuids)} if uuids is not None and len(uuids) <= FILTER_MAX else None
        return selector(metric(field), labels={"node": node} if node else None, among=among)

    def _stats(
        self, fns: Iterable[tuple[str, str]], uuids: set[str], since: float, until: float
    ) -> Stats:
        """{name: {gpu: value}} for rollups `fn(field[window])` over GPUs `uuids` at `until`."""
        w = _window(since, until)
        return {
            f"{fn}:{field}": self._by_gpu(
                f"{fn}({self._sel(field, uuids)}{w})", at=until, uuids=uuids
            )
            for fn, field in fns
        }

    def hang_windows(
        self, *, uuids: Iterable[str], since: float, until: float
    ) -> dict[str, tuple[float, float, float | None, float | None, float | None, int, int, int]]:
        """Per GPU: first/last row time, min util, min/max power, rows, util rows, power rows."""
        wanted = set(uuids)
        if not wanted:
            return {}
        st = self._stats(
            [("tfirst_over_time", ROW), ("tlast_over_time", ROW), ("count_over_time", ROW),
             ("min_over_time", "util_gpu"), ("count_over_time", "util_gpu"),
             ("min_over_time", "power_w"), ("max_over_time", "power_w"),
             ("count_over_time", "power_w")],
            wanted, since, until,
        )  # fmt: skip
        out = {}
        for gpu, lo in st[f"tfirst_over_time:{ROW}"].items():
            out[gpu] = (
                lo,
                st[f"tlast_over_time:{ROW}"][gpu],
                st["min_over_time:util_gpu"].get(gpu),
                st["min_over_time:power_w"].get(gpu),
                st["max_over_time:power_w"].get(gpu),
                int(st[f"count_over_time:{ROW}"][gpu]),
                int(st["count_over_time:util_gpu"].get(gpu, 0)),
                int(st["count_over_time:power_w"].get(gpu, 0)),
            )
        return out

    def idle_windows(
        self, *, uuids: Iterable[str], since: float, until: float, threshold: float
    ) -> dict[str, tuple[float, float, float | None, float | None]]:
        """Per GPU with utilization in the window: first ts, last ts, newest ts above
        `threshold` (None if never), max utilization."""
        wanted = set(uuids)
        if not wanted:
            return {}
        st = self._stats(
            [("tfirst_over_time", "util_gpu"), ("tlast_over_time", "util_gpu"),
             ("max_over_time", "util_gpu")],
            wanted, since, until,
        )  # fmt: skip
        peak = st["max_over_time:util_gpu"]
        busy = self._newest(wanted, since, until, peak, lambda v: v > threshold)
        return {
            gpu: (lo, st["tlast_over_time:util_gpu"][gpu], busy.get(gpu), peak.get(gpu))
            for gpu, lo in st["tfirst_over_time:util_gpu"].items()
        }

    def last_above(
        self, *, uuids: Iterable[str], since: float, until: float, threshold: float
    ) -> dict[str, float]:
        """Per GPU: newest ts in (since, until] whose utilization is >= threshold."""
        wanted = set(uuids)
        if not wanted:
            return {}
        lo = since + 0.001  # ms precision: (since, until] is [since + 1 ms, until]
        sel = self._sel("util_gpu", wanted)
        peak = self._by_gpu(f"max_over_time({sel}{_window(lo, until)})", at=until, uuids=wanted)
        return self._newest(wanted, lo, until, peak, lambda v: v >= threshold)

    def _newest(
        self,
        uuids: set[str],
        since: float,
        until: float,
        peak: dict[str, float],
        hit: Callable[[float], bool],
    ) -> dict[str, float]:
        """Newest ts in [since, until] with hit(util): where the last sample hits, its time;
        the few that hit only earlier are read raw."""
        some = {g for g, v in peak.items() if g in uuids and hit(v)}
        if not some:
            return {}
        sel, w = self._sel("util_gpu", some), _window(since, until)
        last = self._by_gpu(f"last_over_time({sel}{w})", at=until, uuids=some)
        at = self._by_gpu(f"tlast_over_time({sel}{w})", at=until, uuids=some)
        out = {g: at[g] for g in some if g in last and g in at and hit(last[g])}
        rest = some - set(out)
        if rest:
            out.update(self._newest_hit(rest, since, until, hit))
        return out

    def _newest_hit(
        self, uuids: set[str], since: float, until: float, hit: Callable[[float], bool]
    ) -> dict[str, float]:
        out: dict[str, float] = {}
        for chunk in _chunks(sorted(uuids), FILTER_MAX):
            match = selector(metric("util_gpu"), among={"gpu": chunk})
            for line in self.vm.export(match, start=since, end=until):
                gpu = line["metric"]["gpu"]
                for v, ms in zip(line["values"], line["timestamps"], strict=True):
                    ts = ms / 1000.0
                    if since <= ts <= until and v is not None and hit(float(v)):
                        out[gpu] = max(out.get(gpu, ts), ts)
        return out

    def latest(self, *, node: str | None = None) -> dict[str, dict[str, Any]]:
        """Per GPU seen within the lookback: its newest row with `ts` and `node` (fields that
        row left empty are None, as in SQL)."""
        labels = ",".join(
            filter(None, [f'__name__=~"{PREFIX}.+"', f"node={quote(node)}" if node else ""])
        )
        sel = f"{{{labels}}}[{round(self.latest_lookback_s * 1000)}ms]"
        now = time.time()
        stamps = self.vm.query(f"tlast_over_time({sel}) keep_metric_names", at=now)
        values = self.vm.query(f"last_over_time({sel}) keep_metric_names", at=now)
        ts: dict[tuple[str, str], float] = {}
        out: dict[str, dict[str, Any]] = {}
        for r in stamps:
            gpu, field = r["metric"]["gpu"], r["metric"]["__name__"][len(PREFIX) :]
            ts[(gpu, field)] = t = float(r["value"][1])
            row = out.setdefault(gpu, {"ts": t, "node": r["metric"].get("node")} | _EMPTY)
            row["ts"] = max(row["ts"], t)
        for r in values:
            gpu, field = r["metric"]["gpu"], r["metric"]["__name__"][len(PREFIX) :]
            found = out.get(gpu)
            if found is not None and field in _EMPTY and ts.get((gpu, field)) == found["ts"]:
                found[field] = _typed(field, float(r["value"][1]))
        return out

    def series(
        self, *, uuids: Sequence[str], since: float, until: float, bucket_s: int
    ) -> dict[str, list[dict[str, float | None]]]:
        """Per GPU: mean util, power and memory used per bucket [k*b, (k+1)*b) in the range."""
        out: dict[str, list[dict[str, float | None]]] = {u: [] for u in uuids}
        if not uuids:
            return out
        wanted = set(uuids)
        buckets: dict[str, dict[float, dict[str, float | None]]] = defaultdict(dict)
        for key, field in (("util", "util_gpu"), ("power", "power_w"), ("mem", "mem_used_mb")):
            sel = self._sel(field, wanted)
            expr = lambda w, sel=sel: f"avg_over_time({sel}{w})"  # noqa: E731
            for gpu, start, value in self._buckets(expr, since, until, bucket_s, "gpu"):
                if gpu in wanted:
                    row = buckets[gpu].setdefault(
                        start, {"ts": start, "util": None, "power": None, "mem": None}
                    )
                    row[key] = round(value, 2)  # as the SQL store's pages get them
        for gpu, rows in buckets.items():
            out[gpu] = [rows[k] for k in sorted(rows)]
        return out

    def node_utilization(
        self, *, since: float, until: float, bucket_s: int
    ) -> list[tuple[str, float, float]]:
        """(node, bucket start, mean GPU utilization over its samples) for every node."""
        sel = selector(metric("util_gpu"))

        def expr(w: str) -> str:
            total, count = f"sum_over_time({sel}{w})", f"count_over_time({sel}{w})"
            return f"sum by (node) ({total}) / sum by (node) ({count})"

        return list(self._buckets(expr, since, until, bucket_s, "node"))

    def _buckets(
        self, expr: Callable[[str], str], since: float, until: float, bucket_s: int, label: str
    ) -> list[tuple[str, float, float]]:
        """(label, bucket start, value) of `expr(window)` per bucket [k*b, (k+1)*b) clipped to
        [since, until), like SQL's floor(ts / b) grouping.

        A rollup at t over (t - d, t] holds [t - d + 1 ms, t]: so each bucket is evaluated 1 ms
        before its end; the two edge buckets, clipped, by instant queries of their own.
        """
        b = bucket_s
        first, last = int(since // b) * b, int((until - 0.001) // b) * b
        if last < first:
            return []
        out: dict[tuple[str, float], float] = {}
        if last - first >= 2 * b:
            rows = self.vm.query_range(
                expr(f"[{b}s]"), start=first + 2 * b - 0.001, end=last - 0.001, step_s=b
            )
            for r in rows:
                for at, value in r["values"]:
                    out[(r["metric"].get(label, ""), round(float(at) + 0.001) - b)] = float(value)
        for start in {first, last}:
            lo, hi = max(since, start), min(until, start + b)
            for r in self.vm.query(expr(_window(lo, hi - 0.001)), at=hi - 0.001):
                out[(r["metric"].get(label, ""), float(start))] = float(r["value"][1])
        return [(k, t, v) for (k, t), v in out.items() if math.isfinite(v)]


_EMPTY: dict[str, Any] = dict.fromkeys(FIELDS)


def _chunks(items: Sequence[str], n: int) -> Iterable[list[str]]:
    for i in range(0, len(items), n):
        yield list(items[i : i + n])
