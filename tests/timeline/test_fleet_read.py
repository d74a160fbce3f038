"""The fleet grid's one-join read agrees with latest_gpu_samples on both SQL backends."""

from __future__ import annotations

import pytest
from sqlalchemy import insert
from sqlalchemy.orm import Session

from timeline import fleet, fleet_read, history, queries, samples
from timeline import tables as t
from timeline.models import Sample, SampleRow

NOW = 1_800_000_000.0


def _seed(session: Session) -> None:
    gpus = [
        {"uuid": "GPU-a0", "node": "a", "index": 0, "pci_bus_id": "0:18", "name": "H100"},
        {"uuid": "GPU-a1", "node": "a", "index": 1, "pci_bus_id": None, "name": "H100"},
        {"uuid": "GPU-b1", "node": "b", "index": 1, "pci_bus_id": "0:19", "name": None},
        {"uuid": "GPU-b0", "node": "b", "index": 0, "pci_bus_id": "0:18", "name": "A100"},
        {"uuid": "GPU-c0", "node": "c", "index": 0, "pci_bus_id": None, "name": None},  # silent
    ]
    session.execute(insert(t.gpus), [g | {"updated_ts": NOW} for g in gpus])
    rows = [
        Sample(ts=NOW - 20, gpu_uuid="GPU-a0", util_gpu=10.0, power_w=100.0),
        Sample(ts=NOW - 10.001, gpu_uuid="GPU-a0", util_gpu=97.5, temp_gpu=61.0),  # newest
        Sample(ts=NOW - 5, gpu_uuid="GPU-a1", mem_used_mb=512.0, mem_total_mb=81559.0),
        Sample(ts=NOW - 7.123, gpu_uuid="GPU-b0", util_gpu=0.0, power_w=55.25),
        Sample(ts=NOW - 3, gpu_uuid="GPU-b1", util_gpu=33.0),
        Sample(ts=NOW - 1, gpu_uuid="GPU-zz", util_gpu=50.0),  # not in the inventory
    ]
    samples.store().append(session, node="a", samples=[SampleRow.of(r) for r in rows])
    session.commit()


def test_one_join_read_equals_latest_gpu_samples(session: Session) -> None:
    _seed(session)
    cols, fields = fleet.GRID_GPU_COLUMNS, fleet.GRID_FIELDS
    keys = (*cols, *fields, "ts")
    fast = [
        dict(zip(keys, row, strict=True))
        for row in fleet_read.latest_tuples(session, gpu_columns=cols, fields=fields)
    ]
    slow = queries.latest_gpu_samples(session, fields=fields, gpu_columns=cols)
    assert fast == slow
    assert [(r["uuid"], r["ts"]) for r in fast] == [
        ("GPU-a0", NOW - 10.001),
        ("GPU-a1", NOW - 5),
        ("GPU-b0", NOW - 7.123),
        ("GPU-b1", NOW - 3),
        ("GPU-c0", None),
    ]
    assert fast[0]["util_gpu"] == 97.5 and fast[0]["power_w"] is None
    assert fast[4]["util_gpu"] is None
    # The SQL store takes the one-join path; its rows are tuples of ROW_KEYS.
    assert list(map(fleet.row_dict, fleet.read_latest(session))) == slow


def test_only_known_columns_can_be_read() -> None:
    with pytest.raises(ValueError, match="not a column"):
        fleet_read.latest_sql(["uuid", "uuid; DROP TABLE gpus"], ["util_gpu"])
    with pytest.raises(ValueError, match="not a column"):
        fleet_read.latest_sql(["uuid"], ["nope"])


def test_holders_through_the_driver_equal_history_holders_at(session: Session) -> None:
    job = {"scheduler": "slurm", "cluster": "c", "state": "RUNNING", "nodes": [], "payload": {},
           "updated_ts": NOW, "restart_count": 0}  # fmt: skip
    session.execute(insert(t.jobs), [
        job | {"job_id": "1", "user": "ann", "account": "ml", "partition": "gpu"},
        job | {"job_id": "2", "user": None, "account": None, "partition": None},
        job | {"job_id": "3", "user": "bob", "account": "ml", "partition": "gpu"},
        job | {"job_id": "1", "scheduler": "k8s", "user": "kay", "account": "k", "partition": "p"},
    ])  # fmt: skip
    alloc = {"scheduler": "slurm", "node": "a", "start_ts": NOW - 100, "end_ts": None}
    session.execute(insert(t.allocations), [
        alloc | {"job_id": "1", "gpu_index": 0},
        alloc | {"job_id": "1", "gpu_index": 1, "end_ts": NOW + 5},
        alloc | {"job_id": "2", "node": "b", "gpu_index": -1},
        alloc | {"job_id": "3", "gpu_index": 2, "end_ts": NOW},  # ended at `at`: not held
        alloc | {"job_id": "3", "gpu_index": 3, "start_ts": NOW + 1},  # not started yet
        alloc | {"job_id": "1", "scheduler": "k8s", "node": "k", "gpu_index": 0},
    ])  # fmt: skip
    session.commit()
    fast = fleet_read.holders_at(session, at=NOW)
    assert sorted(fast) == sorted(history.holders_at(session, at=NOW))
    assert sorted((h.node, h.gpu_index, h.job_id, h.user) for h in fast) == [
        ("a", 0, "1", "ann"), ("a", 1, "1", "ann"), ("b", -1, "2", None), ("k", 0, "1", "kay"),
    ]  # fmt: skip
