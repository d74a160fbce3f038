"""PostgreSQL's per-node classification of the fleet equals Python's per-GPU one."""

from __future__ import annotations

import random
import threading
from typing import Any

import orjson
import psycopg
import pytest
from sqlalchemy import bindparam, insert, text
from sqlalchemy.orm import Session, sessionmaker

from timeline import fleet, fleet_cells, samples
from timeline import tables as t
from timeline.fleet import Failing, FailingSet
from timeline.models import Sample, SampleRow
from web.fleetgrid import Grid, build_grid, decode_node, grid_from_cells, options_from_cells
from web.fleetstate import filter_options

NOW = 1_800_000_000.0
NAMES = ["gpu-10", "gpu-9", "Gpu-1", "gpu_1", "a.b", "Ärger", "z", "node-ß"]
STATES = [None, "IDLE", "MIXED", "drain", "ALLOCATED+DRAIN", "down*", "maint", "ok"]
REASONS = [None, "", "fleetmedic: xid 79 on GPU 3", "bad cable (ann)", "fleetmedic"]
LABELS: list[Any] = [
    {},
    {"partitions": "gpu,debug"},
    {"partition": "", "rack": "r2"},
    {"rack": 3},  # not a string: no group
    {"topology.kubernetes.io/rack": "r1", "nvidia.com/gpu.clique": "c1"},
    {"nvidia.com/gpu.clique": "c1"},
    {"fleetmedic.io/partition": "train"},
    ["not", "a", "mapping"],
]
UTILS = [None, 0.0, 2.5, 3.5, 5.0, 5.5, 50.0, 99.6, 100.0]

ON_POSTGRES = pytest.mark.parametrize("migrated_url", ["postgres"], indirect=True)


def _seed(session: Session, rng: random.Random) -> FailingSet:
    failing = FailingSet()
    nodes = rng.sample(NAMES, k=len(NAMES))
    job_rows: list[dict[str, Any]] = []
    alloc_rows: list[dict[str, Any]] = []
    gpus: list[dict[str, Any]] = []
    for n, node in enumerate(nodes):
        if n % 4 != 3:  # a few GPUs' nodes are missing from the node table
            session.execute(insert(t.nodes), [{
                "name": node, "scheduler": "slurm", "state": rng.choice(STATES),
                "reason": rng.choice(REASONS), "labels": rng.choice(LABELS),
            }])  # fmt: skip
        count = rng.randint(1, 8)
        indexes: list[int | None] = list(range(count))
        if rng.random() < 0.3:
            indexes = sorted(rng.sample(range(12), k=count))
        if rng.random() < 0.2:
            indexes[-1] = None
        for i, index in enumerate(indexes):
            pci = rng.choice([None, "", f"0000:{i:02x}:00.0"])
            name = rng.choice(["H100", "A100", None, ""])
            gpus.append({"uuid": f"GPU-{node}-{i}", "node": node, "index": index,
                         "pci_bus_id": pci, "name": name})  # fmt: skip
        _allocate(rng, node, indexes, job_rows, alloc_rows)
        if rng.random() < 0.15:
            failing.nodes[node] = Failing("node down", 1)
    # Holders of no inventory GPU (a CPU-only node, an index the node lacks): neither the grid
    # nor the filters show them.
    for jid, node, index in (("cpu-job", "cpu-1", -1), ("gone-gpu", nodes[0], 99)):
        job_rows.append({"scheduler": "slurm", "cluster": "c", "state": "RUNNING", "nodes": [],
                         "payload": {}, "updated_ts": NOW, "restart_count": 0, "job_id": jid,
                         "user": jid, "account": jid, "partition": jid})  # fmt: skip
        alloc_rows.append({"scheduler": "slurm", "node": node, "end_ts": None, "job_id": jid,
                           "gpu_index": index, "start_ts": NOW - 60})  # fmt: skip
    session.execute(insert(t.gpus), [g | {"updated_ts": NOW} for g in gpus])
    session.execute(insert(t.jobs), job_rows)
    session.execute(insert(t.allocations), alloc_rows)
    for g in rng.sample(gpus, k=len(gpus) // 6):
        failing.gpus[g["uuid"]] = Failing("xid 79", 2)
    for g in rng.sample(gpus, k=len(gpus) // 6):
        failing.gpus[f"{g['node']}|{g['pci_bus_id']}"] = Failing("ecc", 3)
    rows = [
        Sample(ts=NOW - rng.choice([1.0, 30.0, 119.0, 121.0, 600.0]), gpu_uuid=g["uuid"],
               util_gpu=rng.choice(UTILS))
        for g in gpus if rng.random() < 0.85
    ]  # fmt: skip
    samples.store().append(session, node="n", samples=[SampleRow.of(r) for r in rows])
    # Half the inventory carries its gpu_ids id (as upsert_gpus writes it), half does not (as
    # rows written before revision 0012 or by hand): the read must take both ways.
    session.execute(text(
        "UPDATE gpus SET gpu_id = (SELECT i.id FROM gpu_ids i WHERE i.uuid = gpus.uuid) "
        "WHERE node IN :nodes"
    ).bindparams(bindparam("nodes", expanding=True)), {"nodes": nodes[::2]})  # fmt: skip
    session.commit()
    return failing


def _allocate(
    rng: random.Random,
    node: str,
    indexes: list[int | None],
    jobs: list[dict[str, Any]],
    allocs: list[dict[str, Any]],
) -> None:
    job = {"scheduler": "slurm", "cluster": "c", "state": "RUNNING", "nodes": [], "payload": {},
           "updated_ts": NOW, "restart_count": 0}  # fmt: skip
    alloc = {"scheduler": "slurm", "node": node, "end_ts": None}
    shape = rng.choice(["none", "whole", "some", "overlap", "whole+some", "ended", "split"])
    if shape == "none":
        return
    jid = f"{node}-{len(jobs)}"
    user = rng.choice(["ann", "bob", None])
    jobs.append(job | {"job_id": jid, "user": user, "account": rng.choice(["ml", None]),
                       "partition": rng.choice(["gpu", "debug", None])})  # fmt: skip
    known = [i for i in indexes if i is not None]
    if shape in ("whole", "whole+some"):
        allocs.append(alloc | {"job_id": jid, "gpu_index": -1, "start_ts": NOW - 50})
    if shape == "ended":
        allocs.append(alloc | {"job_id": jid, "gpu_index": -1, "start_ts": NOW - 50,
                               "end_ts": NOW - 1})  # fmt: skip
    if shape == "split":  # every GPU held, by two jobs: one per half
        jobs.append(job | {"job_id": f"{jid}-c", "user": "eve", "account": "ml",
                           "partition": "gpu"})  # fmt: skip
        for k, index in enumerate(known):
            holder = jid if k < len(known) // 2 else f"{jid}-c"
            allocs.append(alloc | {"job_id": holder, "gpu_index": index, "start_ts": NOW - 30})
    if shape in ("some", "overlap", "whole+some") and known:
        other = f"{jid}-b"
        jobs.append(job | {"job_id": other, "user": "cid", "account": "hpc", "partition": "gpu"})
        if shape != "whole+some":  # the same job id in another cluster: two holder rows
            jobs.append(job | {"job_id": other, "cluster": "c2", "user": "dee", "account": "x",
                               "partition": "p2"})  # fmt: skip
        for index in rng.sample(known, k=max(1, len(known) // 2)):
            allocs.append(alloc | {"job_id": other, "gpu_index": index, "start_ts": NOW - 40})
            if shape == "overlap":  # a newer allocation of the same GPU wins on both paths
                allocs.append(alloc | {"job_id": jid, "gpu_index": index, "start_ts": NOW - 10})


def _settings(failing: FailingSet) -> dict[str, Any]:
    return {"now": NOW, "failing": failing, "idle_threshold": 5.0, "stale_after_s": 120.0}


def _decoded(grid: Grid) -> dict[str, Any]:
    payload = orjson.loads(str(grid.script_json()))  # what the page's script parses
    nodes = {
        e[0]: (
            payload["groups"][e[1]],
            e[2],
            [
                (i, s, u, None if r == -1 else tuple(payload["jobs"][r]))
                for i, s, u, r in decode_node(e)
            ],
        )
        for e in payload["nodes"]
    }
    return {
        "order": [e[0] for e in payload["nodes"]],
        "nodes": nodes,
        "counts": grid.counts,
        "drained": (grid.drained_ours, grid.drained_people),
    }


@ON_POSTGRES
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("side", [False, True], ids=["one-connection", "holders-beside"])
def test_cells_grid_and_options_equal_the_python_classification(
    session: Session, session_factory: sessionmaker[Session], seed: int, side: bool
) -> None:
    failing = _seed(session, random.Random(seed))
    settings = _settings(failing)
    rows = fleet.classify_all(session, **settings)
    cells, jobs, models = fleet_cells.node_cells(
        session, **settings, side=session_factory if side else None
    )
    expected, got = _decoded(build_grid(*rows)), _decoded(grid_from_cells(cells, jobs))
    assert got == expected
    assert sum(got["counts"].values()) == len(rows[1]) > 0
    assert sorted(models) == sorted(fleet_cells.models(session))
    assert options_from_cells(jobs, models) == filter_options(rows[1])


@ON_POSTGRES
def test_cells_read_holders_on_the_side_connection_when_given_one(
    session: Session, session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = _seed(session, random.Random(1))
    settings = _settings(failing)
    threads: list[str] = []
    real = fleet_cells._holders

    def spy(cur: Any, params: dict[str, Any]) -> Any:
        threads.append(threading.current_thread().name)
        return real(cur, params)

    monkeypatch.setattr(fleet_cells, "_holders", spy)
    beside = fleet_cells.node_cells(session, **settings, side=session_factory)
    alone = fleet_cells.node_cells(session, **settings)
    assert beside == alone
    assert threads[0].startswith("fleet-holders") and threads[1] == threading.current_thread().name


@ON_POSTGRES
def test_cells_raise_what_the_side_connection_raised(
    session: Session, session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(_seed(session, random.Random(2)))
    monkeypatch.setattr(fleet_cells, "HOLDERS_SQL", "SELECT no_such_column FROM jobs")
    # The main statement is fine: the error comes from the side's thread, through its future.
    with pytest.raises(psycopg.errors.UndefinedColumn):
        fleet_cells.node_cells(session, **settings, side=session_factory)


@ON_POSTGRES
def test_cells_cover_every_state_and_grid_form_over_the_seeds(session: Session) -> None:
    # The comparison above is only as good as the fleets it sees: they hold every state, both
    # run-length forms, drains of both kinds and several groups.
    failing = _seed(session, random.Random(3))
    settings = _settings(failing)
    grid = grid_from_cells(*fleet_cells.node_cells(session, **settings)[:2])
    assert all(grid.counts.values()), grid.counts
    assert {isinstance(e[5], int) for e in grid.nodes} == {True, False}
    assert len(grid.groups) > 2 and grid.drained_ours + grid.drained_people > 0


def test_cells_refuse_rows_that_arrive_out_of_index_order() -> None:
    fleet_cells._check_order([0, 1, 5, None])
    with pytest.raises(RuntimeError, match="out of index order"):
        fleet_cells._check_order([1, 0])
    with pytest.raises(RuntimeError, match="out of index order"):
        fleet_cells._check_order([None, 0])


@ON_POSTGRES
def test_cells_read_samples_through_the_inventory_id_and_without_it(session: Session) -> None:
    from timeline import service
    from timeline.models import GpuInfo

    service.upsert_gpus(session, gpus=[GpuInfo(uuid="GPU-up", node="n1", index=0)], now=NOW)
    session.execute(insert(t.gpus), [{"uuid": "GPU-raw", "node": "n1", "index": 1}])
    rows = [Sample(ts=NOW - 1, gpu_uuid=u, util_gpu=77.0) for u in ("GPU-up", "GPU-raw")]
    samples.store().append(session, node="n1", samples=[SampleRow.of(r) for r in rows])
    ids = dict(session.execute(text("SELECT uuid, id FROM gpu_ids")).all())
    inventory = dict(session.execute(text("SELECT uuid, gpu_id FROM gpus")).all())
    assert inventory == {"GPU-up": ids["GPU-up"], "GPU-raw": None}
    settings = _settings(FailingSet())
    (cells,), _, _ = fleet_cells.node_cells(session, **settings)
    assert cells.states == "bb" and cells.utils == "[77,77]"
