"""`fleetmedic bench correlate`: events attributed per second, and event -> incident latency.

1. A day of a 128-node (1,024 GPU) fleet with ~3,000 jobs and 100k+ events (floods, Xids, NCCL
   timeouts across ranks, OOMs, job failures) is written to a fresh database; the correlator then
   catches up pass by pass: events_per_s = events read / wall time of those passes.
2. Live: a writer thread ingests batches (append_batch, one transaction each, like the ingest
   API) while the correlator runs on its APScheduler schedule (correlator.jobs). Latency of an
   event = commit time of the pass that wrote its incident change - the event's received_ts.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
import uuid
from typing import Any

from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from benchmarks._correlate_fleet import ILLEGAL, OOM, WATCHDOG, XID79, FleetDay, add_events, bus
from benchmarks._correlate_fleet import build_day as build
from benchmarks._procs import PG_ADMIN_URL
from correlator import service as incidents
from correlator.flows import correlate_once
from correlator.jobs import schedule_correlator
from correlator.models import CorrelationReport
from timeline import db, service
from timeline.models import Batch, Event, EventKind, Sample, Severity
from timeline.settings import Settings


def _database(backend: str) -> contextlib.AbstractContextManager[str]:
    return db.scratch_database(backend, pg_url=PG_ADMIN_URL, prefix="fleetmedic_bench")


def _load(factory: Any, day: FleetDay) -> None:
    jobs, allocs = day.job_models()
    with db.unit_of_work(factory) as s:
        service.upsert_gpus(s, gpus=day.gpus, now=time.time())
        service.upsert_nodes(s, nodes=day.nodes, now=time.time())
        service.upsert_jobs(s, jobs=jobs, now=time.time())
        service.upsert_allocations(s, allocations=allocs)
    for i in range(0, len(day.events), 20_000):
        chunk = day.events[i : i + 20_000]
        with db.unit_of_work(factory) as s:  # received when it happened: history, not live
            service.append_events(s, events=chunk, now=chunk[-1].ts)


def _catch_up(factory: Any, settings: Settings) -> tuple[int, float, int, int]:
    """Run passes until the cursor is at the end; (events, seconds, passes, attributed)."""
    total, passes, attributed, started = 0, 0, 0, time.perf_counter()
    while True:
        report = correlate_once(factory, settings=settings)
        passes += 1
        total += report.events_read
        attributed += report.events_attributed
        if report.events_read == 0:
            return total, time.perf_counter() - started, passes, attributed


class LiveLoad:
    """What agents and cluster sources would send while jobs run: mostly noise, some faults."""

    def __init__(self, day: FleetDay, *, rate: float, seed: int = 5) -> None:
        self.rng = random.Random(seed)
        self.running = [j for j in day.jobs if j.end is None]
        self.multi = [j for j in self.running if len(j.nodes) > 1]
        self.nodes = [n.name for n in day.nodes]
        self.per_tick = max(1, int(rate * 0.05))
        self.tick = 0
        self.sent = 0

    def batch(self, now: float) -> Batch:
        """One tick's batch (50 ms of traffic)."""
        rng, events = self.rng, []
        for _ in range(self.per_tick):
            j = rng.choice(self.running)
            events.append(Event(ts=now, node=j.nodes[0], source="wandb", kind=EventKind.PROGRESS,
                                job_id=j.job_id, payload={"step": self.tick}))  # fmt: skip
        if self.tick % 10 == 0:  # a fault every 0.5 s
            events.append(self._fault(now))
        if self.tick % 60 == 30 and self.multi:  # a multi-node job times out every 3 s
            j = rng.choice(self.multi)
            events += [
                Event(ts=now, node=j.nodes[r // 8], source="joblog", kind=EventKind.NCCL_TIMEOUT,
                      job_id=j.job_id, raw=WATCHDOG.format(rank=r, seq=4242 + self.tick),
                      payload={"rank": r, "seq_num": 4242 + self.tick, "op_type": "ALLREDUCE"})
                for r in range(8 * len(j.nodes))
            ]  # fmt: skip
        node = self.nodes[self.tick % len(self.nodes)]
        samples = [Sample(ts=now, gpu_uuid=f"GPU-{node}-{g}", util_gpu=99.0, power_w=690.0)
                   for g in range(8)]  # fmt: skip
        self.tick += 1
        self.sent += len(events)
        return Batch(agent="bench", node=node, batch_id=uuid.uuid4().hex, events=events,
                     samples=samples)  # fmt: skip

    def _fault(self, now: float) -> Event:
        j = self.rng.choice(self.running)
        node, g = self.rng.choice(j.nodes), self.rng.choice(j.gpus)
        kind = self.rng.choice(("xid79", "oom", "illegal"))
        if kind == "xid79":
            return Event(ts=now, node=node, source="kmsg", kind=EventKind.XID, code=79,
                         pci_bus_id=bus(g), raw=XID79.format(bus=bus(g)),
                         severity=Severity.CRITICAL)  # fmt: skip
        raw, k = (OOM, EventKind.CUDA_OOM) if kind == "oom" else (ILLEGAL, EventKind.CUDA_ERROR)
        return Event(ts=now, node=node, source="joblog", kind=k, job_id=j.job_id, raw=raw,
                     severity=Severity.ERROR)  # fmt: skip


def _live(factory: Any, day: FleetDay, settings: Settings, *, seconds: float, rate: float) -> dict:
    reports: list[CorrelationReport] = []

    def collect(event: JobExecutionEvent) -> None:
        """Keep each pass's report (APScheduler hands over the job's return value)."""
        if isinstance(event.retval, CorrelationReport):
            reports.append(event.retval)

    scheduler = BackgroundScheduler()
    scheduler.add_listener(collect, EVENT_JOB_EXECUTED)
    schedule_correlator(scheduler, factory, settings)
    scheduler.start()
    load, stop = LiveLoad(day, rate=rate), time.time() + seconds
    while time.time() < stop:
        tick = time.time()
        with db.unit_of_work(factory) as s:
            service.append_batch(s, batch=load.batch(tick), received_ts=time.time())
        time.sleep(max(0.0, 0.05 - (time.time() - tick)))
    time.sleep(settings.correlator_interval_s * 3 + 1.0)  # let the last events be correlated
    scheduler.shutdown(wait=True)
    lat = sorted(
        (r.committed_ts - rt) * 1000.0 for r in reports if r.committed_ts is not None
        for rt in r.incident_event_received_ts
    )  # fmt: skip
    busy = sum(r.duration_s for r in reports)
    read = sum(r.events_read for r in reports)
    return {
        "incident_latency_p50_ms": round(statistics.median(lat), 1) if lat else None,
        "incident_latency_p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 1) if lat else None,
        "incident_latency_max_ms": round(lat[-1], 1) if lat else None,
        "latency_probes": len(lat),
        "live_events": load.sent,
        "live_events_read": read,
        "live_passes": len(reports),
        "live_events_per_busy_s": round(read / busy) if busy else None,
        "live_pass_p95_ms": round(
            sorted(r.duration_s for r in reports)[int(0.95 * (len(reports) - 1))] * 1000, 1
        )
        if reports
        else None,
    }


def run(argv: list[str]) -> dict[str, Any]:
    """Build the fleet, measure catch-up throughput, then live latency; one dict of figures."""
    p = argparse.ArgumentParser(prog="fleetmedic bench correlate")
    p.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument("--nodes", type=int, default=128)
    p.add_argument("--seconds", type=float, default=20.0, help="live phase length")
    p.add_argument("--rate", type=float, default=2000.0, help="live events per second")
    p.add_argument("--interval", type=float, default=None, help="correlator interval (s)")
    args = p.parse_args(argv)
    with _database(args.backend) as url:
        db.upgrade(url)
        engine = db.make_engine(url)
        factory = db.make_sessionmaker(engine)
        wall = time.time()
        day = build(nodes=args.nodes, start=wall - 86_400.0, end=wall + 3_600.0)
        add_events(day, until=wall - 60.0)
        t0 = time.perf_counter()
        _load(factory, day)
        load_s = time.perf_counter() - t0
        settings = Settings(database_url=url)
        if args.interval is not None:
            settings = settings.model_copy(update={"correlator_interval_s": args.interval})
        events, seconds, passes, attributed = _catch_up(factory, settings)
        with factory() as s:
            total = len(incidents.list_incidents(s, limit=1_000_000))
            still_open = len(incidents.list_incidents(s, state="open", limit=1_000_000))
        live = _live(factory, day, settings, seconds=args.seconds, rate=args.rate)
        engine.dispose()
    return {
        "events_per_s": round(events / seconds),
        **{k: live[k] for k in ("incident_latency_p95_ms", "incident_latency_p50_ms")},
        "backend": args.backend,
        "nodes": args.nodes,
        "gpus": len(day.gpus),
        "jobs": len(day.jobs),
        "history_events": events,
        "history_events_attributed_to_jobs": attributed,
        "catch_up_s": round(seconds, 2),
        "catch_up_passes": passes,
        "incidents_written": total,
        "incidents_open_after_catch_up": still_open,
        "load_s": round(load_s, 2),
        "interval_s": settings.correlator_interval_s,
        **{k: v for k, v in live.items() if k not in ("incident_latency_p95_ms",)},
    }
