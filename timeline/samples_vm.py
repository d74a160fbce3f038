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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from timeline.models import SampleRow
from timeline.samples import FieldStats, WindowStats
from timeline.vm_client import PREFIX, ROW, VmClient, metric, quote_regex, selector
from timeline.vm_export import exported_stats
from timeline.vm_lines import FIELDS, import_lines_of, typed

# Above this many GPUs a query reads the whole fleet and filters here: a regex of 100k uuids
# would pass VictoriaMetrics' query length limit (16 KiB by default).
FILTER_MAX = 100
# Up to this many GPUs, a read asks in filtered chunks of FILTER_MAX: the hang check's few
# suspect jobs (a few hundred GPUs) then cost a few small queries, not the fleet's export.
CHUNKED_MAX = 2_000


def _window(since: float, until: float) -> str:
    return f"[{max(round((until - since) * 1000), 0) + 1}ms]"


class VmSampleStore:
    """A SampleStore in VictoriaMetrics; the SQL session callers pass is not used."""

    in_transaction = False  # VictoriaMetrics stores a replayed sample once (deduplication)

    def __init__(
        self,
        client: VmClient,
        *,
        latest_lookback_s: float = 3600.0,
        latest_recent_s: float = 300.0,
        export_window_s: float = 120.0,
    ) -> None:
        self.vm = client
        self.latest_lookback_s = latest_lookback_s
        self.latest_recent_s = latest_recent_s
        self.export_window_s = export_window_s

    def append(self, session: Session, *, node: str, samples: Sequence[SampleRow]) -> int:
        """Write samples as series (one JSON line per GPU and field); StoreUnavailable on outage."""
        self.vm.import_lines(import_lines_of(node, samples))
        return len(samples)

    def append_many(
        self, session: Session, *, parts: Sequence[tuple[str, Sequence[SampleRow]]]
    ) -> int:
        """Write several nodes' samples in one import; StoreUnavailable on outage."""
        lines = [line for node, rows in parts for line in import_lines_of(node, rows)]
        if lines:
            self.vm.import_lines(lines)
        return sum(len(rows) for _, rows in parts)

    def latest(
        self,
        session: Session,
        *,
        uuids: Sequence[str] | None = None,
        fields: Sequence[str] | None = None,
    ) -> dict[str, dict]:
        """GPU uuid -> its newest row within the lookback (fields that row left empty are
        None, as in SQL; `extra` is not kept here).

        Read over the last `latest_recent_s` first, then over the whole lookback only for
        the GPUs silent that long: the same rows, with a reporting fleet's rollups over minutes
        of points, not an hour's. Measured at 100k GPUs on an hour of data: 5-9% faster; most
        of the read is the answers' size (README, "the correlator in a child process").
        """
        wanted = None if uuids is None else set(uuids)
        if wanted is not None and not wanted:
            return {}
        names = FIELDS if fields is None else [f for f in FIELDS if f in fields]
        now, recent = time.time(), min(self.latest_recent_s, self.latest_lookback_s)
        out = self._newest_rows(names, wanted, window_s=recent, at=now)
        if recent < self.latest_lookback_s:
            silent = self._silent(wanted, recent_s=recent, at=now)
            if silent:
                out |= self._newest_rows(names, silent, window_s=self.latest_lookback_s, at=now)
        return out

    def _silent(self, uuids: set[str] | None, *, recent_s: float, at: float) -> set[str]:
        """The GPUs with a row in the lookback but none in the last `recent_s`."""
        row = self._sel((ROW,), uuids)
        long, short = round(self.latest_lookback_s * 1000), round(recent_s * 1000)
        expr = f"tlast_over_time({row}[{long}ms]) unless on(gpu) tlast_over_time({row}[{short}ms])"
        return set(self._gpu_values(expr, at=at, uuids=uuids))

    def _newest_rows(
        self, names: Sequence[str], uuids: set[str] | None, *, window_s: float, at: float
    ) -> dict[str, dict]:
        """GPU uuid -> its newest row in (at - window_s, at], as `latest` answers it."""
        window = f"[{round(window_s * 1000)}ms]"
        stamps = self._rollup("tlast", names, uuids, window=window, at=at)
        values = self._rollup("last", names, uuids, window=window, at=at)
        out: dict[str, dict] = {}
        for (gpu, _), t in stamps.items():
            row = out.setdefault(gpu, {"gpu_uuid": gpu, "ts": t} | _EMPTY)
            row["ts"] = max(row["ts"], t)
        for (gpu, field), value in values.items():
            row = out[gpu]
            if stamps.get((gpu, field)) == row["ts"]:
                row[field] = typed(field, value)
        return out

    def newest(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        fields: Sequence[str],
    ) -> dict[str, dict[str, Any]]:
        """GPU uuid -> its newest row's time and each field's newest value in [since, until]."""
        wanted = set(uuids)
        if not wanted or since > until:
            return {}
        w = _window(since, until)
        stamps = self._rollup("tlast", (ROW,), wanted, window=w, at=until)
        values = self._rollup("last", fields, wanted, window=w, at=until)
        out = {
            g: {"gpu_uuid": g, "ts": ts} | dict.fromkeys(fields) for (g, _), ts in stamps.items()
        }
        for (gpu, field), value in values.items():
            if gpu in out:
                out[gpu][field] = typed(field, value)
        return out

    def newest_within(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        bounds: Mapping[str, tuple[float | None, float | None]],
    ) -> set[str]:
        """The GPUs whose newest value of each bounded field in [since, until] is within its
        bounds, filtered by VictoriaMetrics: one query answers with the GPUs that match, where
        `newest` of 100k GPUs answers 100k series a field (bench scale: most of a hang check's
        reads)."""
        wanted = set(uuids)
        if not wanted or since > until:
            return set()
        w, found = _window(since, until), set[str]()
        for group in _groups(wanted):
            parts = []
            for field, (low, high) in sorted(bounds.items()) or [(ROW, (None, None))]:
                expr = f"last_over_time({self._sel((field,), group)}{w})"
                for op, bound in ((">=", low), ("<=", high)):
                    if bound is not None:
                        assert math.isfinite(bound), bound  # a number the correlator computed
                        expr = f"({expr} {op} {float(bound)!r})"
                parts.append(expr)
            # `and on(gpu)`: a GPU matches when every field's series does.
            found.update(self._gpu_values(" and on(gpu) ".join(parts), at=until, uuids=group))
        return found

    def field_range(
        self, session: Session, *, uuids: Sequence[str], since: float, until: float, field: str
    ) -> dict[str, tuple[float, float]]:
        """GPU uuid -> (lowest, highest) `field` in [since, until]: two rollup queries where
        `window_stats` asks eight (counts and times of the field and of the rows)."""
        wanted = set(uuids)
        if not wanted or since > until:
            return {}
        w = _window(since, until)
        low = self._rollup("min", (field,), wanted, window=w, at=until)
        high = self._rollup("max", (field,), wanted, window=w, at=until)
        return {g: (v, high[(g, f)]) for (g, f), v in low.items() if (g, f) in high}

    def window_stats(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        fields: Sequence[str],
    ) -> dict[str, WindowStats]:
        """Per GPU with rows in [since, until]: times, count and min/max of `fields`.

        A short window (the hang detector's 45 s) reads the raw samples in one export and
        aggregates here: at 10k GPUs that took 0.95 s where five rollup queries, whose
        answers are as large, took 3.0 s (bench scale, same load). A longer one (the power
        profiles' 300 s, the idle detector's 33 minutes) is left to MetricsQL's rollups,
        whose answers do not grow with the window: exported, 300 s of 100k GPUs are millions
        of points to parse here (the server's memory grew past 3 GB doing so).
        """
        wanted = set(uuids)
        if not wanted:
            return {}
        if until - since <= self.export_window_s:
            sels = [self._sel((ROW, *fields), group) for group in _groups(wanted)]
            got = exported_stats(self.vm, sels, wanted, since=since, until=until)
        else:
            w, every = _window(since, until), (ROW, *fields)
            got = {
                fn: self._rollup(fn, names, wanted, window=w, at=until)
                for fn, names in [
                    ("min", fields), ("max", fields), ("count", every), ("tfirst", every),
                    ("tlast", every),
                ]
            }  # fmt: skip
        out = {}
        for (gpu, field), first in got["tfirst"].items():
            last, count = got["tlast"].get((gpu, ROW)), got["count"].get((gpu, ROW))
            # Rollups are separate queries: a GPU whose window's rows became searchable between
            # them (written late) is missing from one. Left out until the next pass reads it whole.
            if field != ROW or last is None or count is None:
                continue
            per = {}
            for f in fields:
                key = (gpu, f)
                per[f] = FieldStats(
                    got["min"].get(key), got["max"].get(key), int(got["count"].get(key, 0)),
                    got["tfirst"].get(key), got["tlast"].get(key),
                )  # fmt: skip
            out[gpu] = WindowStats(first, last, int(count), per)
        return out

    def last_above(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        field: str,
        threshold: float,
        since: float,
        until: float,
        inclusive: bool = False,
    ) -> dict[str, float]:
        """GPU uuid -> newest time in [since, until] its field was above (or at) threshold.

        Where the window's last value hits, its time, filtered by VictoriaMetrics (one query
        answers the GPUs that hit at the end, where three answered every GPU); where only an
        earlier value does (busy earlier, not at the end: few GPUs), that GPU's raw samples.
        """
        wanted = set(uuids)
        if not wanted:
            return {}

        def hit(v: float) -> bool:
            return v >= threshold if inclusive else v > threshold

        assert math.isfinite(threshold), threshold  # a setting, never user input
        cmp = f"{'>=' if inclusive else '>'} {float(threshold)!r}"
        sel = self._sel((field,), wanted) + _window(since, until)
        ends = f"(last_over_time({sel}) {cmp})"
        out = self._gpu_values(f"tlast_over_time({sel}) and on(gpu) {ends}", at=until, uuids=wanted)
        earlier = f"(max_over_time({sel}) {cmp}) unless on(gpu) {ends}"
        rest = sorted(self._gpu_values(earlier, at=until, uuids=wanted))
        for i in range(0, len(rest), FILTER_MAX):
            match = selector(metric(field), among={"gpu": rest[i : i + FILTER_MAX]})
            for line in self.vm.export(match, start=since, end=until):
                gpu = line["metric"]["gpu"]
                for v, ms in zip(line["values"], line["timestamps"], strict=True):
                    ts = ms / 1000.0
                    if since <= ts <= until and v is not None and hit(float(v)):
                        out[gpu] = max(out.get(gpu, ts), ts)
        return out

    def series(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        bucket_s: int,
        fields: Sequence[str],
    ) -> dict[str, list[dict[str, float | None]]]:
        """Per GPU: mean of each field per bucket [k*b, (k+1)*b) within [since, until)."""
        if not uuids:
            return {}
        wanted = set(uuids)
        buckets: dict[str, dict[float, dict[str, float | None]]] = defaultdict(dict)
        for field in fields:
            sel = self._sel((field,), wanted)
            expr = lambda w, sel=sel: f"avg_over_time({sel}{w})"  # noqa: E731
            for gpu, start, value in self._buckets(expr, since, until, bucket_s, "gpu"):
                if gpu in wanted:
                    empty = {"ts": start} | dict.fromkeys(fields)
                    buckets[gpu].setdefault(start, empty)[field] = value
        out: dict[str, list[dict[str, float | None]]] = {u: [] for u in uuids}
        for gpu, rows in buckets.items():
            out[gpu] = [rows[k] for k in sorted(rows)]
        return out

    def node_utilization(
        self, session: Session, *, since: float, until: float, bucket_s: int
    ) -> list[tuple[str, float, float]]:
        """(node, bucket start, mean GPU utilization over its samples) for every node."""
        sel = selector(metric("util_gpu"))

        def expr(w: str) -> str:
            total, count = f"sum_over_time({sel}{w})", f"count_over_time({sel}{w})"
            return f"sum by (node) ({total}) / sum by (node) ({count})"

        return self._buckets(expr, since, until, bucket_s, "node")

    # --- helpers ----------------------------------------------------------------------
    def _sel(self, fields: Iterable[str], uuids: set[str] | None) -> str:
        """The series of `fields`, filtered to `uuids` in the query when they are few."""
        names = "|".join(sorted(fields))
        assert all(f == ROW or f in FIELDS for f in fields), names  # never user input
        gpu = (
            f",gpu=~{quote_regex(uuids)}" if uuids is not None and len(uuids) <= FILTER_MAX else ""
        )
        return f'{{__name__=~"{PREFIX}({names})"{gpu}}}'

    def _rollup(
        self, fn: str, fields: Iterable[str], uuids: set[str] | None, *, window: str, at: float
    ) -> dict[tuple[str, str], float]:
        """(gpu, field) -> `fn`_over_time of each field's series over `window` at `at`.

        One query per field: VictoriaMetrics refuses (422) a query that selects more series
        than -search.maxUniqueTimeseries (300k by default), and 100k GPUs with ten fields in
        one selector are a million; split, a query selects at most one series per GPU.
        """
        out: dict[tuple[str, str], float] = {}
        for field in fields:
            for group in [None] if uuids is None else _groups(uuids):
                sel = self._sel((field,), group) + window
                out.update(self._by_gpu_field(f"{fn}_over_time({sel})", at=at, uuids=group))
        return out

    def _gpu_values(self, expr: str, *, at: float, uuids: set[str] | None) -> dict[str, float]:
        """gpu -> value of `expr` at `at`, for the GPUs of `uuids` (None: every GPU) it answers
        (names dropped: a filter such as `a and on(gpu) b` is not a rollup call to keep them on)."""
        rows = self.vm.query(expr, at=at)
        return {
            g: float(r["value"][1])
            for r in rows
            if (g := r["metric"].get("gpu")) is not None and (uuids is None or g in uuids)
        }

    def _by_gpu_field(
        self, expr: str, *, at: float, uuids: set[str] | None
    ) -> dict[tuple[str, str], float]:
        """(gpu, field) -> value of a rollup call `expr` (names kept) at `at`."""
        out = {}
        for r in self.vm.query(f"{expr} keep_metric_names", at=at):
            labels = r["metric"]
            gpu = labels.get("gpu")
            if gpu is not None and (uuids is None or gpu in uuids):
                out[(gpu, labels.get("__name__", "")[len(PREFIX) :])] = float(r["value"][1])
        return out

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


def _groups(uuids: set[str]) -> list[set[str]]:
    """The GPUs in filtered chunks where they are few enough, else all at once (read whole)."""
    if len(uuids) <= FILTER_MAX or len(uuids) > CHUNKED_MAX:
        return [uuids]
    ordered = sorted(uuids)
    return [set(ordered[i : i + FILTER_MAX]) for i in range(0, len(ordered), FILTER_MAX)]


_EMPTY: dict[str, Any] = dict.fromkeys((*FIELDS, "extra"))
