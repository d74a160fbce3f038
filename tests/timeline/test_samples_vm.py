"""The VictoriaMetrics samples store against the real binary: every SampleStore read answers
what the SQL store answers for the same samples, hostile label values included."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.helpers.services import victoriametrics
from timeline import fleet, history, queries, samples, samples_vm, service
from timeline.db import unit_of_work
from timeline.models import GpuInfo, Sample, SampleRow
from timeline.samples_sql import SqlSampleStore
from timeline.samples_vm import VmSampleStore
from timeline.vm_client import VmClient, quote, quote_regex, selector

pytestmark = pytest.mark.integration

# What MetricsQL treats specially, as far as the bounds let it through: quotes, backslashes,
# braces, regex and label syntax, a query's own operators, non-ASCII.
HOSTILE = 'n"1\\{x}=~|.*,gpu="a"} or vector(1) #ü\\'
NODES = {"GPU-a": "node-a", "GPU-b": HOSTILE, "GPU-c.*|x": HOSTILE}
T0 = float(int(time.time()) - 1800)  # within the store's latest lookback
STEP = 10.0
FIELDS = ["util_gpu", "power_w", "mem_used_mb", "temp_gpu", "ecc_sbe_volatile"]


def _sample(gpu: str, i: int) -> Sample:
    ts = T0 + i * STEP + 0.25  # not on a whole second: millisecond precision matters
    if gpu == "GPU-a":  # busy for 10 minutes, then idle: busy only early in a late window
        util, power = (95.0, 600.0) if i < 60 else (0.0, 70.0)
    elif gpu == "GPU-b":  # idle at 3%, one sample exactly at the threshold
        util, power = (5.0 if i == 100 else 3.0), 65.0
    else:  # spins at full utilization; every 7th row without utilization, every 5th no power
        util, power = 100.0, 135.0
    spotty = gpu != "GPU-a" and gpu != "GPU-b"
    return Sample(
        ts=ts,
        gpu_uuid=gpu,
        util_gpu=None if spotty and i % 7 == 0 else util,
        power_w=None if spotty and i % 5 == 0 else power,
        mem_used_mb=1000.0 + i,
        temp_gpu=40.0 + (i % 3),
        ecc_sbe_volatile=i // 50,
        remap_pending=i > 170,
    )


def _load(
    session_factory: sessionmaker[Session],
    vm: VmSampleStore,
    samples_of: Callable[[str], Iterable[Sample]] | None = None,
) -> None:
    """Each GPU's samples (`samples_of(gpu)`, by default 180 of `_sample`) into both stores."""
    by_node: dict[str, list[Sample]] = {}
    for gpu, node in NODES.items():
        made = (_sample(gpu, i) for i in range(180)) if samples_of is None else samples_of(gpu)
        by_node.setdefault(node, []).extend(made)
    sql = SqlSampleStore()
    with unit_of_work(session_factory) as s:
        gpus = [GpuInfo(uuid=g, node=n, index=i) for i, (g, n) in enumerate(NODES.items())]
        service.upsert_gpus(s, gpus=gpus, now=T0)
        parts = []
        for node, models in by_node.items():
            rows = [SampleRow.of(m) for m in models]
            sql.append(s, node=node, samples=rows)
            parts.append((node, rows))
        # VictoriaMetrics takes every node's rows in one import (a group commit's), each series
        # labelled with its own node: the reads below then match the SQL store's node by node.
        vm.append_many(s, parts=parts)


def _close(got: Any, want: Any) -> None:
    """Equal, floats within 1e-9 relative (VictoriaMetrics keeps milliseconds and float64)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (got, want)
        for k in want:
            _close(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want, strict=True):
            _close(g, w)
    elif dataclasses.is_dataclass(want) and not isinstance(want, type):
        assert type(got) is type(want), (got, want)
        _close(dataclasses.asdict(got), dataclasses.asdict(want))
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-9), (got, want)
    else:
        assert got == want, (got, want)


# The hang check's filter (busy at under a power ceiling), its edges, and open ends.
BOUNDS: list[dict[str, tuple[float | None, float | None]]] = [
    {"util_gpu": (90.0, None), "power_w": (None, 200.0)},
    {"util_gpu": (3.0, 3.0)},
    {"util_gpu": (None, 5.0), "power_w": (65.0, 65.0)},
    {"power_w": (None, None)},
    {"temp_gpu": (42.0, 42.0), "ecc_sbe_volatile": (4, None)},  # none: the count is 3
    {},
]

WINDOWS = [
    (since, until, export_s)
    for since, until in [
        (T0 + 1190.25, T0 + 1790.25), (T0 + 0.25, T0 + 590.25), (T0 + 1195.0, T0 + 1785.0),
        (T0 + 0.25, T0 + 1790.25),
    ]
    for export_s in (900.0, 0.0)
]  # fmt: skip


def test_vm_store_answers_every_read_like_the_sql_store(
    session_factory: sessionmaker[Session], vm_store: VmSampleStore
) -> None:
    _load(session_factory, vm_store)
    sql, vm, uuids = SqlSampleStore(), vm_store, sorted(NODES)
    end = T0 + 179 * STEP + 0.25
    with session_factory() as s:
        _close(vm.latest(s), sql.latest(s))
        _close(vm.latest(s, uuids=["GPU-b", "GPU-x"]), sql.latest(s, uuids=["GPU-b", "GPU-x"]))
        assert vm.latest(s, uuids=[]) == {}
        for since in (end - 30.0, end - 5.0, end + 1.0):  # the fleet's now, as the hang check asks
            args = {"uuids": [*uuids, "GPU-x"], "since": since, "until": end, "fields": FIELDS}
            _close(vm.newest(s, **args), sql.newest(s, **args))
        assert vm.newest(s, uuids=[], since=end - 30.0, until=end, fields=FIELDS) == {}
        for bounds in BOUNDS:
            for since in (end - 30.0, end - 5.0):
                args = {"uuids": [*uuids, "GPU-x"], "since": since, "until": end}
                got = vm.newest_within(s, **args, bounds=bounds)
                assert got == sql.newest_within(s, **args, bounds=bounds), bounds
        assert (
            vm.newest_within(s, uuids=uuids, since=end + 1.0, until=end, bounds=BOUNDS[0]) == set()
        )
        for since, until, export_s in WINDOWS:
            vm.export_window_s = export_s  # raw samples aggregated here, or MetricsQL rollups
            for fields in (FIELDS, ["util_gpu"]):
                args = {"uuids": [*uuids, "GPU-x"], "since": since, "until": until}
                _close(
                    vm.window_stats(s, **args, fields=fields),
                    sql.window_stats(s, **args, fields=fields),
                )
            for field in ("power_w", "util_gpu", "ecc_sbe_volatile"):
                args = {"uuids": [*uuids, "GPU-x"], "since": since, "until": until}
                _close(
                    vm.field_range(s, **args, field=field), sql.field_range(s, **args, field=field)
                )
            for threshold in (0.0, 5.0, 50.0, 100.0):
                for inclusive in (False, True):
                    args = {"uuids": uuids, "field": "util_gpu", "threshold": threshold}
                    args |= {"since": since, "until": until, "inclusive": inclusive}
                    _close(vm.last_above(s, **args), sql.last_above(s, **args))
        for bucket in (60, 300, 3600):
            for since, until in [(T0, end), (T0 + 45.0, end - 100.0), (T0 + 130, T0 + 170)]:
                args = {"since": since, "until": until, "bucket_s": bucket}
                _close(
                    vm.series(s, uuids=uuids, fields=FIELDS[:3], **args),
                    sql.series(s, uuids=uuids, fields=FIELDS[:3], **args),
                )
                _close(
                    sorted(vm.node_utilization(s, **args)), sorted(sql.node_utilization(s, **args))
                )


def test_pages_read_the_same_through_the_vm_store(
    session_factory: sessionmaker[Session], on_vm: VmSampleStore
) -> None:
    _load(session_factory, on_vm)
    end = T0 + 179 * STEP + 0.25
    with session_factory() as s:
        on_vm_latest = queries.latest_gpu_samples(s)
        on_vm_node = queries.latest_gpu_samples(s, node=HOSTILE)
        on_vm_series = history.gpu_series(s, uuids=sorted(NODES), since=T0, until=end, bucket_s=300)
        on_vm_fleet = list(map(fleet.row_dict, fleet.read_latest(s)))  # the grid's tuples
        old = samples.use(SqlSampleStore())
        try:
            _close(on_vm_latest, queries.latest_gpu_samples(s))
            _close(on_vm_node, queries.latest_gpu_samples(s, node=HOSTILE))
            _close(on_vm_fleet, list(map(fleet.row_dict, fleet.read_latest(s))))
            _close(
                on_vm_series,
                history.gpu_series(s, uuids=sorted(NODES), since=T0, until=end, bucket_s=300),
            )
        finally:
            samples.use(old)
    assert {g["uuid"] for g in on_vm_node} == {"GPU-b", "GPU-c.*|x"}


def test_label_values_are_quoted_so_a_hostile_one_selects_only_itself(
    vm_store: VmSampleStore,
) -> None:
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    sel = selector("fleetmedic_gpu_util_gpu", labels={"node": HOSTILE})
    vm_store.vm.import_lines(
        [{"metric": {"__name__": "fleetmedic_gpu_util_gpu", "gpu": g, "node": n},
          "values": [1.0], "timestamps": [int(T0 * 1000)]} for g, n in NODES.items()]
    )  # fmt: skip
    got = vm_store.vm.query(f"last_over_time({sel}[1h])", at=T0 + 60)
    assert sorted(r["metric"]["gpu"] for r in got) == ["GPU-b", "GPU-c.*|x"]
    among = selector("fleetmedic_gpu_util_gpu", among={"gpu": ["GPU-c.*|x"]})
    got = vm_store.vm.query(f"last_over_time({among}[1h])", at=T0 + 60)
    assert [r["metric"]["gpu"] for r in got] == ["GPU-c.*|x"]  # not a regex of its own


def test_fleet_wide_reads_select_at_most_one_series_per_gpu_per_query(
    session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    # VictoriaMetrics refuses a query selecting more series than -search.maxUniqueTimeseries
    # (300k by default; 100k GPUs with ten fields are a million). Capped at the GPU count here,
    # every fleet-wide read still answers as the SQL store does.
    flags = (f"-search.maxUniqueTimeseries={len(NODES)}",)
    with victoriametrics(tmp_path, flags=flags) as url, httpx.Client(timeout=30) as client:
        vm = VmSampleStore(VmClient(url, client=client, flush_writes=True), export_window_s=0.0)
        _load(session_factory, vm)
        sql, uuids = SqlSampleStore(), sorted(NODES)
        with session_factory() as s:
            _close(vm.latest(s), sql.latest(s))
            args = {"uuids": uuids, "since": T0 + 0.25, "until": T0 + 1790.25}
            _close(
                vm.window_stats(s, **args, fields=FIELDS),
                sql.window_stats(s, **args, fields=FIELDS),
            )


def test_reads_of_some_gpus_ask_in_filtered_chunks(
    session_factory: sessionmaker[Session], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One GPU a chunk, and a VictoriaMetrics that answers at most one series a query or export:
    # every read of a few GPUs (the hang check's suspects) must be asked chunk by chunk.
    monkeypatch.setattr(samples_vm, "FILTER_MAX", 1)
    flags = ("-search.maxUniqueTimeseries=1", "-search.maxExportSeries=1")
    with victoriametrics(tmp_path, flags=flags) as url, httpx.Client(timeout=30) as client:
        vm = VmSampleStore(VmClient(url, client=client, flush_writes=True))
        _load(session_factory, vm)
        sql, uuids, end = SqlSampleStore(), sorted(NODES), T0 + 179 * STEP + 0.25
        with session_factory() as s:
            args: dict[str, Any] = {"uuids": uuids, "since": end - 30.0, "until": end}
            _close(vm.newest(s, **args, fields=FIELDS), sql.newest(s, **args, fields=FIELDS))
            for bounds in BOUNDS:  # two selectors a query, each within the one-series limit
                got = vm.newest_within(s, **args, bounds=bounds)
                assert got == sql.newest_within(s, **args, bounds=bounds), bounds
            for export_s in (900.0, 0.0):
                vm.export_window_s = export_s
                args = {"uuids": uuids, "since": T0 + 0.25, "until": end, "fields": FIELDS}
                _close(vm.window_stats(s, **args), sql.window_stats(s, **args))


def test_latest_reads_an_hour_back_only_for_the_gpus_silent_for_minutes(
    session_factory: sessionmaker[Session], vm_store: VmSampleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = float(int(time.time()))
    ages = {"GPU-a": range(600, 0, -10), "GPU-b": range(2400, 1800, -10), "GPU-c.*|x": [5000]}
    _load(
        session_factory,
        vm_store,
        lambda gpu: [
            Sample(ts=now - age + 0.5, gpu_uuid=gpu, util_gpu=float(age % 97),
                   power_w=None if age % 20 else 100.0 + age)
            for age in ages[gpu]
        ],
    )  # fmt: skip
    sql = SqlSampleStore()
    asked: list[str] = []
    query = vm_store.vm.query
    monkeypatch.setattr(
        vm_store.vm, "query", lambda expr, **kw: asked.append(expr) or query(expr, **kw)
    )
    with session_factory() as s:
        for uuids in (None, ["GPU-a", "GPU-b"], ["GPU-b"]):
            got = vm_store.latest(s, uuids=uuids, fields=FIELDS)
            want = sql.latest(
                s, uuids=["GPU-a", "GPU-b"] if uuids is None else uuids, fields=FIELDS
            )
            _close({g: {k: r[k] for k in ("ts", *FIELDS)} for g, r in got.items()},
                   {g: {k: r[k] for k in ("ts", *FIELDS)} for g, r in want.items()})  # fmt: skip
    assert "GPU-c.*|x" in sql.latest(s)  # silent past the lookback: SQL keeps it, VM not
    hour = [e for e in asked if "[3600000ms]" in e and "unless" not in e]
    only_b = f"gpu=~{quote_regex(['GPU-b'])}"
    assert hour and all(only_b in e for e in hour), hour  # only the silent GPU's series


def test_window_stats_leave_out_a_gpu_one_rollup_did_not_see_yet(
    session_factory: sessionmaker[Session], vm_store: VmSampleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rollups are separate queries; rows written late became searchable between two of them
    # (bench scale at 100k: KeyError, and the idle pass failed). That GPU waits a pass.
    _load(session_factory, vm_store)
    vm_store.export_window_s = 0.0  # the rollups' path, as the idle check's long window takes
    rollup = vm_store._rollup

    def count_misses_gpu_a(fn: str, fields: Any, uuids: Any, **kw: Any) -> Any:
        got = rollup(fn, fields, uuids, **kw)
        return {k: v for k, v in got.items() if k[0] != "GPU-a"} if fn == "count" else got

    monkeypatch.setattr(vm_store, "_rollup", count_misses_gpu_a)
    args: dict[str, Any] = {"uuids": sorted(NODES), "since": T0 + 0.25, "until": T0 + 1790.25}
    with session_factory() as s:
        got = vm_store.window_stats(s, **args, fields=FIELDS)
        want = SqlSampleStore().window_stats(s, **args, fields=FIELDS)
    assert set(want) == set(NODES)
    _close(got, {g: w for g, w in want.items() if g != "GPU-a"})
