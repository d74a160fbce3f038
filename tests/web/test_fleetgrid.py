"""The fleet grid's fast paths: one-pass classification, the compact payload, the snapshot cache."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest

from timeline.fleet import (
    INDEX,
    NODE,
    UTIL_GPU,
    UUID,
    Failing,
    FailingSet,
    FleetInputs,
    GpuRow,
    GpuState,
    NodeView,
    classify,
    classify_inputs,
    gpu_row,
    row_dict,
)
from timeline.history import Holder
from web.fleetgrid import STATE_CODES, build_grid, decode_node
from web.fleetstate import FleetCache, FleetFilter, FleetSnapshot

NOW = 1_800_000_000.0


def _fleet(seed: int) -> tuple[FleetInputs, FailingSet]:
    """A random fleet: GPUs fresh or stale, busy or not, held per GPU or per node, failing
    by uuid, by PCI bus id or by node; some GPUs on nodes the scheduler does not know."""
    rng = random.Random(seed)
    latest: list[GpuRow] = []
    holders: list[Holder] = []
    failing = FailingSet()
    for n in range(40):
        node = f"n{n:02d}"
        count = rng.randint(1, 8)
        for i in range(count) if n % 2 else sorted(rng.sample(range(8), count)):
            uuid, pci = f"GPU-{n}-{i}", f"0000:{i:02x}:00.0"
            latest.append(gpu_row(
                {"uuid": uuid, "node": node, "index": i, "pci_bus_id": pci, "name": "H100",
                 "ts": rng.choice((None, NOW - 5, NOW - 500)),
                 "util_gpu": rng.choice((None, 0.0, 3.0, 5.0, 5.5, 99.6))}
            ))  # fmt: skip
            if rng.random() < 0.4:
                holders.append(Holder(node, i, f"j{n}-{i % 3}", "alice", "acct", "p1"))
            if rng.random() < 0.05:
                failing.gpus[rng.choice((uuid, f"{node}|{pci}"))] = Failing("xid 79", n)
        if rng.random() < 0.1:
            holders.append(Holder(node, -1, f"whole{n}", "bob", None, None))
        if rng.random() < 0.05:
            failing.nodes[node] = Failing("node lost", 1000 + n)
    if seed % 2:
        rng.shuffle(latest)  # rows need not come grouped by node
    nodes = [{"name": f"n{n:02d}", "state": "IDLE", "reason": None} for n in range(35)]
    return FleetInputs(latest, holders, nodes), failing


def _expected(gpu: GpuRow, inputs: FleetInputs, failing: FailingSet) -> GpuState:
    row = row_dict(gpu)
    mine = [h for h in inputs.holders if h.node == row["node"]]
    alloc = next((h for h in mine if h.gpu_index == row["index"]), None) or next(
        (h for h in reversed(mine) if h.gpu_index < 0), None
    )
    bad = failing.for_gpu(row["node"], row["uuid"], row["pci_bus_id"])
    return classify(row, now=NOW, allocated=alloc is not None, failing=bad is not None,
                    idle_threshold=5.0, stale_after_s=120.0)  # fmt: skip


@pytest.mark.parametrize("seed", range(5))
def test_one_pass_classification_agrees_with_classify_on_every_gpu(seed: int) -> None:
    inputs, failing = _fleet(seed)
    nodes, gpus = classify_inputs(inputs, now=NOW, failing=failing)
    assert [row[UUID] for row, *_ in gpus] == [row[UUID] for row in inputs.latest]
    assert [state for *_, state in gpus] == [_expected(r, inputs, failing) for r in inputs.latest]
    assert {s for *_, s in gpus} == set(GpuState)  # every branch taken
    # Nodes only seen in telemetry still get a row of the grid.
    assert set(nodes) == {r[NODE] for r in inputs.latest} | {n["name"] for n in inputs.nodes}


@pytest.mark.parametrize("seed", range(5))
def test_compact_grid_decodes_to_the_classified_states_utils_jobs_and_indexes(seed: int) -> None:
    inputs, failing = _fleet(seed)
    nodes, gpus = classify_inputs(inputs, now=NOW, failing=failing)
    grid = build_grid(nodes, gpus)
    payload = json.loads(str(grid.script_json()))  # what the page's script parses
    decoded = {
        (entry[0], index): (state, util, payload["jobs"][ref][0] if ref >= 0 else None)
        for entry in payload["nodes"]
        for index, state, util, ref in decode_node(entry)
    }
    expected = {
        (row[NODE], row[INDEX]): (
            STATE_CODES[state],
            -1 if row[UTIL_GPU] is None else round(row[UTIL_GPU]),
            None if alloc is None else alloc.job_id,
        )
        for row, alloc, _, state in gpus
    }
    assert decoded == expected
    assert [e[0] for e in payload["nodes"]] == sorted(e[0] for e in payload["nodes"])
    assert sum(grid.counts.values()) == len(gpus)
    if seed % 2:
        return
    # The run-length forms are used where they apply, and lists where they do not.
    assert any(isinstance(e[5], int) for e in payload["nodes"])
    assert any(isinstance(e[5], list) for e in payload["nodes"])
    assert any(e[6] is None for e in payload["nodes"])
    assert any(isinstance(e[6], list) for e in payload["nodes"])


def test_grid_json_cannot_end_the_script_element_it_sits_in() -> None:
    name = "</script><script>alert(1)</script><!--"
    nodes = {name: NodeView(name, "IDLE", None)}
    row = gpu_row({"uuid": "u", "node": name, "index": 0, "pci_bus_id": None, "util_gpu": 1.0})
    text = str(build_grid(nodes, [(row, None, None, GpuState.FREE)]).script_json())
    assert "<" not in text and json.loads(text)["nodes"][0][0] == name


def test_filtered_grid_keeps_only_matching_gpus_and_leaves_the_cached_grid_whole() -> None:
    inputs, failing = _fleet(1)
    snap = FleetSnapshot(classify_inputs(inputs, now=NOW, failing=failing))
    whole = snap.grid()
    narrowed = snap.filtered_grid(FleetFilter(user="bob"))
    held_by_bob = [a for _, a, _, _ in snap.rows[1] if a is not None and a.user == "bob"]
    assert sum(narrowed.counts.values()) == len(held_by_bob) > 0
    assert snap.filtered_grid(FleetFilter()) is whole is snap.grid()  # built once, reused
    assert sum(whole.counts.values()) == len(inputs.latest)
    assert snap.options()["users"] == ["alice", "bob"]


def test_fleet_cache_serves_one_snapshot_for_its_ttl_then_builds_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from web import fleetstate

    builds: list[int] = []

    def fake_rows(session: Any, *, settings: Any, now: float) -> Any:
        builds.append(1)
        inputs, failing = _fleet(len(builds))
        return classify_inputs(inputs, now=NOW, failing=failing)

    monkeypatch.setattr(fleetstate, "classified_rows", fake_rows)
    clock = [100.0]
    monkeypatch.setattr(fleetstate.time, "monotonic", lambda: clock[0])
    cache = FleetCache(ttl_s=5)
    first = cache.snapshot(None, settings=None, now=time.time())  # type: ignore[arg-type]
    grid = first.grid()
    clock[0] += 4.9
    assert cache.snapshot(None, settings=None, now=0) is first  # type: ignore[arg-type]
    assert first.grid() is grid and len(builds) == 1
    clock[0] += 0.1  # the ttl has passed: a new classification, and a new grid from it
    second = cache.snapshot(None, settings=None, now=0)  # type: ignore[arg-type]
    assert second is not first and len(builds) == 2
    assert second.grid() is not grid
    # ttl 0: every call classifies afresh.
    off = FleetCache(ttl_s=0)
    assert off.snapshot(None, settings=None, now=0) is not off.snapshot(None, settings=None, now=0)  # type: ignore[arg-type]
    assert len(builds) == 4


def test_fleet_api_body_is_the_views_json_cut_at_the_byte_budget_with_the_rest_counted() -> None:
    import orjson

    from timeline.fleet import views_of

    inputs, failing = _fleet(2)
    snap = FleetSnapshot(classify_inputs(inputs, now=NOW, failing=failing))
    views = json.loads(orjson.dumps(views_of(*snap.rows)))
    body, left_out = snap.api_body(10_000_000)
    assert json.loads(body) == views and left_out == 0
    sizes = [len(orjson.dumps(v)) for v in views]
    budget = sum(sizes[:3]) + sizes[3] // 2  # three nodes fit, the fourth does not
    body, left_out = snap.api_body(budget)
    assert json.loads(body) == views[:3] and left_out == len(views) - 3
    assert snap.api_body(budget)[0] is body  # kept for the snapshot's life


def test_concurrent_heatmap_misses_wait_for_one_build() -> None:
    import threading

    from web.api.heatmap import _Cache

    cache, builds, started = _Cache(), [], threading.Event()

    def build() -> dict[str, Any]:
        builds.append(1)
        started.set()
        time.sleep(0.2)
        return {"nodes": ["n1"]}

    answers: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(cache.get_or_build(1.0, NOW, build)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and answers == [{"nodes": ["n1"]}] * 4
    assert cache.get_or_build(1.0, NOW + 31, build) == {"nodes": ["n1"]} and len(builds) == 2


def test_fleet_cache_serves_a_stale_snapshot_while_one_background_build_replaces_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contextlib
    import threading

    from web import fleetstate

    release, builds = threading.Event(), []

    def fake_rows(session: Any, *, settings: Any, now: float) -> Any:
        builds.append(threading.current_thread().name)
        if len(builds) == 2:
            assert release.wait(5)  # the background build is slow
        inputs, failing = _fleet(len(builds))
        return classify_inputs(inputs, now=NOW, failing=failing)

    monkeypatch.setattr(fleetstate, "classified_rows", fake_rows)
    clock = [100.0]
    monkeypatch.setattr(fleetstate.time, "monotonic", lambda: clock[0])
    cache = FleetCache(ttl_s=5, factory=lambda: contextlib.nullcontext())  # type: ignore[arg-type,return-value]

    def get() -> FleetSnapshot:
        return cache.snapshot(None, settings=None, now=0)  # type: ignore[arg-type]

    first = get()
    clock[0] += 6  # past the ttl: served as is, and one build starts in the background
    assert get() is first and get() is first
    assert builds == ["MainThread", "fleet-cache"] and cache.refreshing
    release.set()
    for _ in range(500):
        if not cache.refreshing:
            break
        time.sleep(0.01)
    second = get()
    assert second is not first and second.rows[1] != first.rows[1] and len(builds) == 2
    assert second._grid is not None  # the grid was built in the background too
    clock[0] += 5 * FleetCache.STALE_LIMIT  # far too old: rebuilt in the caller, not served
    assert get() is not second and builds[-1] == "MainThread"


def test_bulk_allocation_pauses_cyclic_gc_and_always_restores_it() -> None:
    import gc

    from timeline.fleet import bulk_allocation

    assert gc.isenabled()
    with pytest.raises(RuntimeError), bulk_allocation():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()  # someone else paused it: left paused
    try:
        with bulk_allocation():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    inputs, failing = _fleet(0)
    build_grid(*classify_inputs(inputs, now=NOW, failing=failing))
    assert gc.isenabled()


def test_failing_by_node_and_pci_matches_at_every_bar_of_the_key() -> None:
    rows = [
        gpu_row({"uuid": "u1", "node": "a|b", "index": 0, "pci_bus_id": "c", "ts": NOW}),
        gpu_row({"uuid": "u2", "node": "a", "index": 0, "pci_bus_id": "b|c", "ts": NOW}),
        gpu_row({"uuid": "u3", "node": "a", "index": 1, "pci_bus_id": "c", "ts": NOW}),
        gpu_row({"uuid": "u4", "node": "a", "index": 2, "pci_bus_id": None, "ts": NOW}),
    ]
    failing = FailingSet(gpus={"a|b|c": Failing("xid 79", 7)})
    _, gpus = classify_inputs(FleetInputs(rows, [], []), now=NOW, failing=failing)
    assert [(r[UUID], state) for r, _, _, state in gpus] == [
        ("u1", GpuState.FAILING),
        ("u2", GpuState.FAILING),
        ("u3", GpuState.FREE),
        ("u4", GpuState.FREE),
    ]


@pytest.mark.parametrize(
    ("state", "reason", "drained", "ours"),
    [
        ("IDLE", None, False, False),
        ("drained*", "fleetmedic: xid 79", True, True),
        ("MIXED+DRAIN", "bad fan", True, False),
        ("cordoned", None, True, False),
        ("down", "fleetmedic:x", True, True),
        ("ALLOCATED", "fleetmedic: stale", False, False),
    ],
)
def test_drained_nodes_and_ours(state: str, reason: str | None, drained: bool, ours: bool) -> None:
    node = NodeView("n1", state, reason)
    assert (node.drained, node.drained_by_us) == (drained, ours)
    grid = build_grid({"n1": node}, [])
    assert (grid.drained_ours, grid.drained_people) == (0, 0)  # no GPU: no row in the grid
    row = gpu_row({"uuid": "u", "node": "n1", "index": 0, "ts": NOW})
    grid = build_grid({"n1": node}, [(row, None, None, GpuState.FREE)])
    assert grid.nodes[0][2] == (2 if ours else 1 if drained else 0)


def test_metrics_count_gpus_by_state_and_give_each_gpu_its_utilization() -> None:
    from timeline.settings import Settings
    from web.fleetmetrics import DashboardCollector

    inputs, failing = _fleet(3)
    rows = classify_inputs(inputs, now=NOW, failing=failing)

    class Fixed(FleetCache):
        def rows(self, session: Any, *, settings: Any, now: float) -> Any:
            return rows

    settings = Settings(metrics_per_gpu=True)
    found = DashboardCollector(None, settings, Fixed(0))._gpus(None)  # type: ignore[arg-type]
    by_state = {s.labels["state"]: s.value for s in found[0].samples}
    assert by_state == {s.value: sum(1 for *_, g in rows[1] if g is s) for s in GpuState}
    util = {(s.labels["node"], s.labels["gpu"]): s.value for s in found[1].samples}
    assert util == {
        (r[NODE], str(r[INDEX])): r[UTIL_GPU] for r, *_ in rows[1] if r[UTIL_GPU] is not None
    }
    assert len(util) > 0


def test_fleet_is_classified_by_postgresql_only_over_the_sql_sample_store(
    settings: Any,
) -> None:
    from timeline import samples
    from web.app import create_app

    before = samples.store()
    try:
        postgres = settings.database_url.startswith("postgresql")
        assert create_app(settings).state.fleet_cache.cells is postgres
        # VictoriaMetrics keeps the newest samples itself: gpu_latest is not kept in SQL.
        vm = settings.model_copy(update={"samples_backend": "victoriametrics"})
        assert create_app(vm).state.fleet_cache.cells is False
    finally:
        samples.use(before)


def test_a_snapshot_of_cells_makes_per_gpu_rows_only_when_asked_and_only_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from timeline.fleet_cells import JobRow, NodeCells
    from web import fleetstate

    inputs, failing = _fleet(1)
    rows = classify_inputs(inputs, now=NOW, failing=failing)
    made: list[int] = []

    def fake_rows(session: Any, *, settings: Any, now: float) -> Any:
        made.append(1)
        return rows

    def fake_cells(session: Any, *, settings: Any, now: float, side: Any) -> Any:
        cells = [NodeCells("n1", "all", 0, "bi", "[90,0]", 7, None, [0, 1])]
        return cells, {7: JobRow("42", "ann", "ml", "gpu")}, ["H100"]

    monkeypatch.setattr(fleetstate, "classified_rows", fake_rows)
    monkeypatch.setattr(fleetstate, "classified_cells", fake_cells)
    cache = FleetCache(ttl_s=5, cells=True)
    snap = cache.snapshot(None, settings=None, now=0)  # type: ignore[arg-type]
    assert snap.counts()[GpuState.BUSY] == 1 and snap.counts()[GpuState.IDLE_ALLOCATED] == 1
    assert snap.grid().jobs == [["42", "ann"]] and snap.options()["users"] == ["ann"]
    assert made == [] and snap.rows is None  # the page needs no per-GPU rows
    again = cache.snapshot(None, settings=None, now=0, rows=True)  # type: ignore[arg-type]
    assert again is snap and snap.rows is rows and made == [1]
    assert cache.rows(None, settings=None, now=0) is rows and made == [1]  # type: ignore[arg-type]
    assert (
        snap.filtered_grid(FleetFilter(user="bob")).counts
        == build_grid(*rows, keep=FleetFilter(user="bob").keeps).counts
    )
