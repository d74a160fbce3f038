"""Idle GPUs from the REAL H100 idle/busy trace: allocated and at 0% for 30 min -> a finding with
GPU-hours and cost per job, user and account; resolved when busy again or released."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from correlator import service
from tests.correlator.correlator_fleet import Fleet, gpu_uuid, load_trace
from timeline.models import Allocation, Sample, Scheduler

TRACE = load_trace("trace_idle_busy_idle.jsonl")
IDLE = [r for r in TRACE if r["util"] == 0 and r["power_mw"] < 80_000]  # before the matmul
BUSY = [r for r in TRACE if r["util"] >= 98]  # the real matmul
HELD = [r for r in TRACE if r["util"] == 0 and r["power_mw"] > 120_000][-20:]  # context held
T0 = 50_000.0
PRICE = 2.0


def _samples(node: str, gpus: list[int], rows: list[dict], start: float, end: float) -> list:
    """One sample per GPU every 10 s, cycling through real trace rows."""
    out, k, ts = [], 0, start
    while ts < end:
        r = rows[k % len(rows)]
        out += [
            Sample(ts=ts, gpu_uuid=gpu_uuid(node, g), util_gpu=float(r["util"]),
                   power_w=r["power_mw"] / 1000.0, mem_used_mb=r["mem_used"] / 2**20)
            for g in gpus
        ]  # fmt: skip
        ts, k = ts + 10.0, k + 1
    return out


def _fleet(session_factory: sessionmaker[Session], **settings: float) -> Fleet:
    fleet = Fleet(session_factory)
    fleet.settings = fleet.settings.model_copy(update={"idle_cost_per_gpu_hour": PRICE, **settings})
    fleet.nodes(["n1", "n2"])
    fleet.job("idle-job", ["n1"], start=T0, gpus=[0, 1], user="gina", account="vision")
    fleet.job("busy-job", ["n2"], start=T0, gpus=[0, 1], user="hank", account="nlp")
    fleet.samples("n1", _samples("n1", [0, 1], IDLE + HELD, T0, T0 + 2100.0))
    fleet.samples("n2", _samples("n2", [0, 1], BUSY, T0, T0 + 2100.0))
    return fleet


def test_allocated_gpus_idle_for_30_minutes_become_findings_with_cost(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    report = fleet.correlate(now=T0 + 2100.0)
    assert report.idle_opened == 2
    with session_factory() as s:
        found = service.list_idle_findings(s, state="open")
    assert {(f.job_id, f.node, f.gpu_index) for f in found} == {
        ("idle-job", "n1", 0),
        ("idle-job", "n1", 1),
    }
    f = found[0]
    assert f.idle_since_ts >= T0 and f.last_seen_ts == T0 + 2090.0
    assert f.gpu_hours == pytest.approx((f.last_seen_ts - f.idle_since_ts) / 3600.0, abs=1e-5)
    assert f.gpu_hours > 0.5 and f.cost == pytest.approx(f.gpu_hours * PRICE, abs=1e-3)
    assert (f.user, f.account, f.pci_bus_id) == ("gina", "vision", "0000:18:00.0")


def test_idle_totals_aggregate_per_job_user_and_account(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.correlate(now=T0 + 2100.0)
    with session_factory() as s:
        by_user = service.idle_totals(s, by="user")
        by_account = service.idle_totals(s, by="account")
        by_job = service.idle_totals(s, by="job_id")
        per_gpu = service.list_idle_findings(s)
    total = sum(f.gpu_hours for f in per_gpu)
    assert [(t.key, t.gpus) for t in by_user] == [("gina", 2)]
    assert by_user[0].gpu_hours == pytest.approx(total)
    assert by_account[0].key == "vision" and by_job[0].key == "idle-job"
    assert by_account[0].cost == pytest.approx(total * PRICE, abs=1e-3)
    with pytest.raises(ValueError):
        service.idle_totals(s, by="partition")


def test_idle_below_the_duration_is_no_finding_and_the_duration_is_configurable(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    assert fleet.correlate(now=T0 + 1200.0).idle_opened == 0  # 20 min: not yet
    fleet.settings = fleet.settings.model_copy(update={"idle_min_duration_s": 600.0})
    assert fleet.correlate(now=T0 + 1300.0).idle_opened == 2


def test_finding_resolves_when_the_gpu_is_busy_again_and_keeps_its_waste(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.correlate(now=T0 + 2100.0)
    fleet.samples("n1", _samples("n1", [0], BUSY, T0 + 2100.0, T0 + 2160.0))
    fleet.samples("n1", _samples("n1", [1], IDLE, T0 + 2100.0, T0 + 2160.0))
    report = fleet.correlate(now=T0 + 2170.0)
    assert report.idle_resolved == 1
    with session_factory() as s:
        states = {f.gpu_index: f for f in service.list_idle_findings(s)}
    assert states[0].state == "resolved" and states[0].resolution == "the GPU is busy again"
    assert states[0].gpu_hours > 0.5
    assert states[1].state == "open" and states[1].last_seen_ts == T0 + 2150.0


def test_finding_resolves_when_the_allocation_ends(session_factory: sessionmaker[Session]) -> None:
    fleet = _fleet(session_factory)
    fleet.correlate(now=T0 + 2100.0)
    ended = [
        Allocation(scheduler=Scheduler.SLURM, job_id="idle-job", node="n1", gpu_index=g,
                   gpu_uuid=gpu_uuid("n1", g), start_ts=T0, end_ts=T0 + 2120.0)
        for g in (0, 1)
    ]  # fmt: skip
    fleet._append(allocations=ended)
    fleet.correlate(now=T0 + 2200.0)
    with session_factory() as s:
        found = service.list_idle_findings(s)
    assert {(f.state, f.resolution) for f in found} == {("resolved", "the allocation ended")}
