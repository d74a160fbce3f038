"""`fleetmedic bench dashboard --gpus N --hours H --backend sqlite|postgres --json`.

Seeds a fresh store with N GPUs (8 per node) and H hours of 10-second telemetry, plus jobs on
~70% of the GPUs, hardware and job events, incidents (~1 per 200 GPUs, a tenth open) and idle
findings, then times the pages and APIs through the real app (in-process ASGI client, no
network). Seeding writes rows directly (samples with COPY on PostgreSQL, executemany on
SQLite; not through the ingest API), which the output says. The issue's keys are timed with
no reuse between requests (fleet_cache_s=0); fleet_page_cached_* time the page as served by
default. Targets (issue #10): fleet page p95 <= 200 ms at 10k GPUs at 1 h and 12 h of history
(12 h within 20% of 1 h), <= 500 ms at 100k GPUs on PostgreSQL, page <= 500 kB.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

import timeline.deliveries  # noqa: F401  (registers the notifications table)
from benchmarks._procs import PG_ADMIN_URL
from benchmarks.fleet_stages import fleet_stages
from correlator import tables as ct
from timeline import db, rollups
from timeline import tables as t
from timeline.settings import Settings

STEP_S = 10.0
CHUNK = 50_000


def _insert(factory: sessionmaker[Session], table: Any, rows: list[dict[str, Any]]) -> None:
    for i in range(0, len(rows), CHUNK):
        with db.unit_of_work(factory) as s:
            s.execute(insert(table), rows[i : i + CHUNK])


def _node_rows(names: list[str], now: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"name": n, "scheduler": "slurm", "cluster": "bench", "state": "IDLE",
         "labels": {"partition": f"p{i % 4}"}, "reason": None, "reason_user": None,
         "reason_ts": None, "taints": [], "updated_ts": now, "last_seen_ts": now}
        for i, n in enumerate(names)
    ]  # fmt: skip
    for row in rows[:: max(len(rows) // 50, 1)]:  # ~2% drained by a person
        row.update(state="DRAIN", reason="bad fan", reason_user="ops", reason_ts=now - 3600)
    return rows


def _job_rows(names: list[str], now: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A job holding all 8 GPUs of each of the first 70% of the nodes, and its allocations."""
    jobs, allocs = [], []
    for k, n in enumerate(names[: int(len(names) * 0.7)]):
        job_id = str(100_000 + k)
        jobs.append(
            {"scheduler": "slurm", "cluster": "bench", "job_id": job_id, "name": f"train-{k}",
             "user": f"user{k % 50}", "account": f"acct{k % 12}", "partition": f"p{k % 4}",
             "state": "RUNNING", "start_ts": now - 6 * 3600, "nodes": [n], "gpus": 8,
             "payload": {}, "updated_ts": now, "restart_count": 0}
        )  # fmt: skip
        allocs += [
            {"scheduler": "slurm", "job_id": job_id, "node": n, "gpu_index": i,
             "start_ts": now - 6 * 3600}
            for i in range(8)
        ]  # fmt: skip
    return jobs, allocs


def _seed_fleet(
    factory: sessionmaker[Session], gpus: int, now: float, rng: random.Random
) -> dict[str, Any]:
    names = [f"gpu-{n:05d}" for n in range(max(gpus // 8, 1))]
    gpu_rows = [
        {"uuid": f"GPU-{n}-{i}", "node": n, "index": i, "gpu_id": 8 * k + i + 1,
         "pci_bus_id": f"00000000:{0x18 + 16 * i:02X}:00.0", "name": "NVIDIA H100 80GB HBM3",
         "updated_ts": now}
        for k, n in enumerate(names)
        for i in range(8)
    ][:gpus]  # fmt: skip
    jobs, allocs = _job_rows(names, now)
    _insert(factory, t.nodes, _node_rows(names, now))
    _insert(factory, t.gpus, gpu_rows)
    _insert(factory, t.jobs, jobs)
    _insert(factory, t.allocations, allocs)
    return {"names": names, "gpus": gpu_rows, "jobs": jobs}


_SAMPLE_COLUMNS = ("ts_ms", "gpu_id", "util_gpu", "power_w", "mem_used_mb", "temp_gpu")


def _write_samples(factory: sessionmaker[Session], rows: list[tuple[Any, ...]]) -> None:
    """Sample rows as tuples of _SAMPLE_COLUMNS, through the driver: COPY on PostgreSQL,
    executemany on SQLite (12 h at 10k GPUs is 43.2M rows: Core's per-row cost took most of
    an hour)."""
    cols = ", ".join(f'"{c}"' for c in _SAMPLE_COLUMNS)
    with db.unit_of_work(factory) as s:
        raw = db.driver_connection(s)
        if s.get_bind().dialect.name == "postgresql":
            with raw.cursor() as cur, cur.copy(f"COPY samples ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            holes = ", ".join("?" * len(_SAMPLE_COLUMNS))
            raw.executemany(f"INSERT INTO samples ({cols}) VALUES ({holes})", rows)


def _seed_samples(
    factory: sessionmaker[Session],
    gpus: list[dict[str, Any]],
    hours: float,
    now: float,
    rng: random.Random,
) -> int:
    """Compact rows (revision 0009): GPU ids, integer milliseconds, and gpu_latest."""
    ids = [{"id": g["gpu_id"], "uuid": g["uuid"], "node": g["node"]} for g in gpus]
    _insert(factory, t.gpu_ids, ids)
    steps = int(hours * 3600 / STEP_S)
    total = 0
    rows: list[tuple[Any, ...]] = []
    pending: list[tuple[Any, ...]] = []
    utils = (0.0, 0.0, 54.0, 100.0, 100.0)
    for k in range(steps):  # oldest first, as agents deliver them
        ts_ms = round((now - (steps - k) * STEP_S) * 1000)
        rows = [(ts_ms, g["id"], rng.choice(utils), 300.0, 60_000.0, 50.0) for g in ids]
        pending += rows
        total += len(rows)
        if len(pending) >= 20 * CHUNK:
            _write_samples(factory, pending)
            pending = []
    if pending:
        _write_samples(factory, pending)
    newest = [dict(zip(_SAMPLE_COLUMNS, row, strict=True)) for row in rows]
    _insert(factory, t.gpu_latest, newest)  # the newest step
    return total


def _roll_up(factory: sessionmaker[Session], now: float) -> float:
    """Run the rollup job as a server would have (each run is bounded): seconds it took."""
    started = time.perf_counter()

    def marks() -> tuple[int | None, ...]:
        with factory() as s:
            return tuple(rollups.mark(s, level.name) for level in (rollups.MINUTE, rollups.HOUR))

    for _ in range(1000):  # until the watermarks stop moving
        before = marks()
        rollups.run_rollups(factory, now=now)
        if marks() == before:
            break
    return time.perf_counter() - started


def _seed_findings(factory: sessionmaker[Session], fleet: dict[str, Any], now: float) -> None:
    """~500 Xid events, an incident per 200 GPUs (a tenth open), an idle GPU per 10 jobs."""
    gpus = fleet["gpus"]
    events = [
        {"ts": now - k, "received_ts": now - k, "node": g["node"], "source": "kmsg",
         "kind": "xid", "gpu_uuid": g["uuid"], "code": 79 if k % 5 == 0 else 31,
         "severity": "critical", "message": "NVRM: Xid 79, GPU has fallen off the bus.",
         "payload": {}, "count": 1}
        for k, g in enumerate(gpus[:: max(len(gpus) // 500, 1)])
    ]  # fmt: skip
    incidents = [
        {"fingerprint": f"fp{k}", "occurrence": 1, "state": "open" if k % 10 == 0 else "resolved",
         "category": "gpu_hardware", "blame": "node", "title": "Xid 79: GPU has fallen off the bus",
         "kind": "xid", "code": 79, "culprit_node": g["node"], "culprit_gpu_uuid": g["uuid"],
         "culprit_gpu_index": g["index"], "affected_jobs": [], "opened_ts": now - 600,
         "last_seen_ts": now - 60, "updated_ts": now, "count": 1, "confidence": 0.95,
         "explanation": "GPU fell off the bus.", "evidence_event_ids": [1],
         "symptom_event_ids": [], "details": {}}
        for k, g in enumerate(gpus[::200])
    ]  # fmt: skip
    idle = [
        {"state": "open", "scheduler": "slurm", "job_id": job["job_id"], "user": job["user"],
         "account": job["account"], "node": job["nodes"][0],
         "gpu_uuid": f"GPU-{job['nodes'][0]}-0", "gpu_index": 0, "idle_since_ts": now - 7200,
         "last_seen_ts": now, "gpu_hours": 2.0, "cost": 4.0, "updated_ts": now}
        for job in fleet["jobs"][::10]
    ]  # fmt: skip
    _insert(factory, t.events, events)
    _insert(factory, ct.incidents, incidents)
    _insert(factory, ct.idle_findings, idle)


def _time(get: Callable[[str], Any], path: str, n: int) -> tuple[list[float], int]:
    get(path)  # warm caches and code paths once
    times, size = [], 0
    for _ in range(n):
        started = time.perf_counter()
        r = get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        size = len(r.content)
    return times, size


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 1)


def _served(app: Any) -> Any:
    """The app as a real server runs it, for the in-process test client.

    The test client offers ASGI's `http.response.debug` extension, so every page response
    sends the client its whole template context, which the client keeps in reference cycles:
    each fleet page's 100k-object grid then lived until a full garbage collection (1.2 s at
    100k GPUs, in one request of 20). Servers such as uvicorn offer no such extension."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if "extensions" in scope:
            scope = scope | {"extensions": dict(scope["extensions"])}
            scope["extensions"].pop("http.response.debug", None)
        await app(scope, receive, send)

    return asgi


def _client(settings: Settings) -> tuple[Any, Any]:
    """A test client of the app as served, and the app's state."""
    from fastapi.testclient import TestClient

    from web.app import create_app

    app = create_app(settings)
    return TestClient(_served(app)), app.state


def _measure(url: str, fleet: dict[str, Any], n: int) -> dict[str, Any]:
    # The keys are timed cold: no reuse of the classified fleet between requests.
    settings = Settings(
        database_url=url, data_dir=Path(tempfile.mkdtemp()), page_refresh_s=0, fleet_cache_s=0
    )
    out: dict[str, Any] = {}
    client, state = _client(settings)
    with client:
        factory = state.session_factory
        out |= fleet_stages(factory, now=time.time(), n=max(n // 2, 3))
        fleet_times, size = _time(client.get, "/", n)
        out.update(
            fleet_page_p50_ms=_p(fleet_times, 0.5),
            fleet_page_p95_ms=_p(fleet_times, 0.95),
            page_bytes=size,
        )
        for key, path in (
            ("fleet_api", "/api/v1/fleet"),
            ("idle_page", "/idle"),
            ("incident_page", "/incidents/1"),
            ("job_page", f"/jobs/{fleet['jobs'][0]['job_id']}"),
            ("node_page", f"/nodes/{fleet['names'][0]}"),
        ):
            times, _ = _time(client.get, path, n)
            out[f"{key}_p95_ms"] = _p(times, 0.95)
            out[f"{key}_p50_ms"] = _p(times, 0.5)

        def cold_heatmap(path: str) -> Any:
            state.heatmap_cache = None  # time the query, not the cache
            return client.get(path)

        times, size = _time(cold_heatmap, "/api/v1/fleet/heatmap?hours=1", max(n // 4, 3))
        out.update(heatmap_api_p95_ms=_p(times, 0.95), heatmap_bytes=size)
    # As served by default: the classified fleet reused for fleet_cache_s across requests.
    served = settings.model_copy(update={"fleet_cache_s": Settings().fleet_cache_s})
    client, _ = _client(served)
    with client:
        times, _ = _time(client.get, "/", n)
        out.update(
            fleet_page_cached_p50_ms=_p(times, 0.5), fleet_page_cached_p95_ms=_p(times, 0.95)
        )
    return out


def run(argv: list[str]) -> dict[str, Any]:
    """Seed, then time the pages; one dict (the CLI prints it as one JSON line)."""
    ap = argparse.ArgumentParser(prog="fleetmedic bench dashboard")
    ap.add_argument("--gpus", type=int, default=10_000)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--requests", type=int, default=20)
    args = ap.parse_args(argv)
    rng, now = random.Random(10), time.time()
    with db.scratch_database(args.backend, pg_url=PG_ADMIN_URL, prefix="fleetmedic_bench") as url:
        db.upgrade(url)
        engine = db.make_engine(url)
        factory = db.make_sessionmaker(engine)
        started = time.perf_counter()
        fleet = _seed_fleet(factory, args.gpus, now, rng)
        rows = _seed_samples(factory, fleet["gpus"], args.hours, now, rng)
        _seed_findings(factory, fleet, now)
        seed_s = time.perf_counter() - started
        rollup_s = _roll_up(factory, now)
        if args.backend == "postgres":
            # A running store is vacuumed by autovacuum; freshly seeded tables are not, and
            # autovacuum would do it in the middle of the timings (both cores are shared).
            with contextlib.closing(engine.connect()) as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM (ANALYZE)"
                )
        result = {
            "gpus": args.gpus,
            "hours": args.hours,
            "history_rows": rows,
            "backend": args.backend,
        }
        result |= _measure(url, fleet, args.requests)
        engine.dispose()
    result["seed_s"] = round(seed_s, 1)
    result["rollup_s"] = round(rollup_s, 1)
    result["seeding"] = (
        "rows written directly (samples with COPY on PostgreSQL, executemany on SQLite), not "
        "through the ingest API; "
        "then the server's rollup job run until caught up (rollup_s)"
    )
    result["requests_per_path"] = args.requests
    return result
