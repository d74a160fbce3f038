"""The store API on both backends: batches stored whole and once, queries by window and GPU."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from timeline import queries, service
from timeline.errors import BatchTooLarge
from timeline.models import (
    Allocation,
    Batch,
    Event,
    EventKind,
    GpuInfo,
    Job,
    JobPatch,
    Sample,
    Scheduler,
)


def _batch(batch_id: str = "batch-0001", n: int = 3) -> Batch:
    gpus = [
        GpuInfo(uuid=f"GPU-{i}", node="n1", index=i, pci_bus_id=f"0000:0{i}:00.0") for i in range(n)
    ]
    samples = [
        Sample(ts=100.0 + k, gpu_uuid=f"GPU-{i}", util_gpu=50.0 + k)
        for i in range(n)
        for k in range(2)
    ]
    events = [
        Event(ts=101.0, node="n1", source="kmsg", kind=EventKind.XID, code=79, dedup_key="boot:1"),
        Event(ts=101.5, node="n1", source="joblog", kind=EventKind.NCCL_TIMEOUT),
    ]
    return Batch(
        agent="a1", node="n1", batch_id=batch_id, gpus=gpus, samples=samples, events=events
    )


def test_append_batch_stores_every_item_once(session: Session) -> None:
    result = service.append_batch(session, batch=_batch())
    session.commit()
    assert (result.duplicate, result.samples, result.events, result.gpus) == (False, 6, 2, 3)
    assert queries.count_rows(session, table="samples") == 6


def test_replayed_batch_id_stores_nothing_twice(session: Session) -> None:
    service.append_batch(session, batch=_batch())
    session.commit()
    again = service.append_batch(session, batch=_batch())
    session.commit()
    assert again.duplicate is True
    assert queries.count_rows(session, table="samples") == 6
    assert queries.count_rows(session, table="events") == 2


def test_event_with_seen_dedup_key_is_skipped_across_batches(session: Session) -> None:
    service.append_batch(session, batch=_batch("batch-0001"))
    second = service.append_batch(session, batch=_batch("batch-0002"))
    session.commit()
    assert second.events == 1  # the keyed Xid was already stored; the NCCL line is new
    assert queries.count_rows(session, table="events") == 3


def test_oversized_batch_is_refused_before_anything_is_written(session: Session) -> None:
    with pytest.raises(BatchTooLarge):
        service.append_batch(session, batch=_batch(n=4), max_items=5)
    session.rollback()
    assert queries.count_rows(session, table="ingest_batches") == 0


def test_latest_gpu_samples_returns_the_newest_row_per_gpu(session: Session) -> None:
    service.append_batch(session, batch=_batch())
    session.commit()
    latest = {row["uuid"]: row for row in queries.latest_gpu_samples(session)}
    assert set(latest) == {"GPU-0", "GPU-1", "GPU-2"}
    assert latest["GPU-1"]["ts"] == 101.0 and latest["GPU-1"]["util_gpu"] == 51.0


def test_jobs_holding_gpu_follows_allocation_spans(session: Session) -> None:
    job = Job(scheduler=Scheduler.SLURM, job_id="42", user="alice", state="RUNNING", nodes=["n1"])
    allocs = [
        Allocation(
            scheduler=Scheduler.SLURM, job_id="42", node="n1", gpu_index=0, start_ts=100, end_ts=200
        ),
        Allocation(scheduler=Scheduler.SLURM, job_id="42", node="n1", gpu_index=1, start_ts=100),
    ]
    batch = Batch(
        agent="slurm", node="ctl", batch_id="batch-jobs-1", jobs=[job], allocations=allocs
    )
    service.append_batch(session, batch=batch)
    session.commit()
    assert [
        j["job_id"] for j in queries.jobs_holding_gpu(session, node="n1", gpu_index=0, at=150)
    ] == ["42"]
    assert queries.jobs_holding_gpu(session, node="n1", gpu_index=0, at=250) == []
    assert len(queries.jobs_holding_gpu(session, node="n1", gpu_index=1, at=10_000)) == 1
    assert queries.jobs_holding_gpu(session, node="n2", gpu_index=1, at=150) == []


def test_events_in_window_filters_by_time_node_and_kind(session: Session) -> None:
    service.append_batch(session, batch=_batch())
    session.commit()
    assert len(queries.events_in_window(session, since=101.0, until=101.2)) == 1
    assert [e["code"] for e in queries.events_in_window(session, kind="xid")] == [79]
    assert queries.events_in_window(session, node="other") == []


def test_job_patch_fills_only_its_fields_and_ignores_unknown_jobs(session: Session) -> None:
    job = Job(scheduler=Scheduler.SLURM, job_id="7", user="bob", state="RUNNING", nodes=["n1"])
    service.upsert_jobs(session, jobs=[job], now=1.0)
    patches = [
        JobPatch(job_id="7", checkpoint_dir="/ckpt/run7"),
        JobPatch(job_id="8", wandb_run="team/proj/abc"),  # not stored: changes nothing
    ]
    assert service.patch_jobs(session, patches=patches) == 1
    session.commit()
    stored = queries.get_job(session, job_id="7")
    assert stored is not None
    assert (stored["checkpoint_dir"], stored["user"], stored["state"]) == (
        "/ckpt/run7",
        "bob",
        "RUNNING",
    )
    assert queries.get_job(session, job_id="8") is None


def test_a_job_stored_with_an_end_closes_its_open_allocations(session: Session) -> None:
    alloc = Allocation(scheduler=Scheduler.SLURM, job_id="9", node="n1", gpu_index=0, start_ts=100)
    running = Job(scheduler=Scheduler.SLURM, job_id="9", state="RUNNING", nodes=["n1"])
    batch = Batch(agent="s", node="s", batch_id="batch-run-9", jobs=[running], allocations=[alloc])
    service.append_batch(session, batch=batch)
    assert len(queries.jobs_holding_gpu(session, node="n1", gpu_index=0, at=10_000)) == 1
    ended = running.model_copy(update={"state": "COMPLETED", "end_ts": 500.0})
    service.upsert_jobs(session, jobs=[ended], now=600.0)
    session.commit()
    assert queries.jobs_holding_gpu(session, node="n1", gpu_index=0, at=10_000) == []
    assert len(queries.jobs_holding_gpu(session, node="n1", gpu_index=0, at=400)) == 1


def test_events_in_window_can_return_the_newest_first(session: Session) -> None:
    service.append_batch(session, batch=_batch())
    session.commit()
    newest = queries.events_in_window(session, limit=1, newest_first=True)
    assert [e["kind"] for e in newest] == ["nccl_timeout"]  # ts 101.5, after the Xid at 101.0
    assert [e["kind"] for e in queries.events_in_window(session, limit=1)] == ["xid"]


def test_keyed_events_repeated_inside_one_batch_are_stored_once(session: Session) -> None:
    ev = Event(ts=1.0, node="n1", source="kmsg", kind=EventKind.XID, code=79, dedup_key="boot:7")
    other = ev.model_copy(update={"dedup_key": "boot:8"})
    batch = Batch(agent="a", node="n1", batch_id="batch-keyed-1", events=[ev, ev, other])
    assert service.append_batch(session, batch=batch).events == 2
    session.commit()
    assert queries.count_rows(session, table="events") == 2
