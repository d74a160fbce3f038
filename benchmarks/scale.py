"""`fleetmedic bench scale`: a simulated fleet's agents push through the real HTTP server into
the chosen samples store (SQLite, PostgreSQL or VictoriaMetrics) for M minutes.

The server (`fleetmedic serve`, one worker, the correlator on) runs in its own process; with
`--backend victoriametrics` a real `victoria-metrics` binary (Debian's package) runs beside it
and the server's SQL store is SQLite. After the load: the store's bytes on disk per GPU-sample,
the hang and idle detectors' window queries over every GPU, and one full correlator pass.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from benchmarks._procs import PG_ADMIN_URL, RssTrace, free_port, process, rss_mb
from benchmarks._scale_load import ScaleFleet, run_load
from correlator import flows
from correlator import hang as hang_detector
from correlator import idle as idle_detector
from correlator import service as correlator_service
from timeline import db, fleet, history, queries, samples
from timeline.settings import Settings

TOKEN = "bench-token"
KEYS = (
    "gpus", "backend", "samples_per_s", "ingest_lag_p95_s", "ingest_lag_max_s", "rss_start_mb",
    "rss_end_mb", "disk_bytes_per_sample", "hang_query_ms", "idle_query_ms", "correlator_pass_ms",
)  # fmt: skip


@contextlib.contextmanager
def _victoriametrics(workdir: Path) -> Iterator[str]:
    exe = shutil.which("victoria-metrics")
    if exe is None:
        raise RuntimeError("no victoria-metrics on PATH (Debian package victoria-metrics)")
    port = free_port()
    cmd = [exe, f"-storageDataPath={workdir}", f"-httpListenAddr=127.0.0.1:{port}",
           "-search.latencyOffset=0s", "-dedup.minScrapeInterval=1ms"]  # fmt: skip
    with process(cmd, f"http://127.0.0.1:{port}/health", "victoria-metrics"):
        yield f"http://127.0.0.1:{port}"


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and its children so far."""
    p = psutil.Process(pid)
    times = [c.cpu_times() for c in [p, *p.children(recursive=True)]]
    return sum(t.user + t.system for t in times)


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _fold_wal(path: Path, tries: int = 100) -> None:
    """Fold the WAL into the file and truncate it, so the files' size is the data's. A TRUNCATE
    checkpoint that meets a reader or writer of the running server says busy and leaves the WAL
    at its high-water size (the first reading then counted megabytes the last did not)."""
    with sqlite3.connect(path, timeout=30) as conn:
        for _ in range(tries):
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return
            time.sleep(0.1)
    raise RuntimeError(f"could not checkpoint {path}: the server kept it busy")


def _disk_bytes(settings: Settings, vm_dir: Path | None) -> int:
    """Bytes the samples store holds on disk now."""
    if vm_dir is not None:
        with httpx.Client() as c:
            c.get(f"{settings.victoriametrics_url}/internal/force_flush").raise_for_status()
        return _dir_bytes(vm_dir)
    url = settings.database_url
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        _fold_wal(path)
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    engine = db.make_engine(url)
    with engine.connect() as conn:
        size = int(conn.execute(text("select pg_database_size(current_database())")).scalar_one())
    engine.dispose()
    return size


def _index_note(index: int | None, samples: int) -> str:
    # VictoriaMetrics' series index is written once per series per day, not per sample: a short
    # run's bytes per sample carry all of it, a long one's little. Said apart so both are visible.
    if index is None:
        return ""
    per = index / max(samples, 1)
    return f"; of the disk bytes per sample, {per:.1f} are VictoriaMetrics' series index (indexdb)"


def _say_warnings(log: Path) -> None:
    """How many warnings the server logged during the run, and the commonest (stderr)."""
    lines = [x for x in log.read_text(errors="replace").splitlines() if "WARNING" in x]
    common = Counter(x.split("WARNING", 1)[1][:120].strip() for x in lines).most_common(3)
    print(
        f"bench scale: the server logged {len(lines)} warnings; commonest: {common}",
        file=sys.stderr,
    )


def _setup(fleet: ScaleFleet, base: str) -> None:
    """GPU identities, jobs and allocations, before the timed load."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
        for batch in fleet.setup_batches(time.time()):
            client.post("/api/v1/ingest", content=batch.model_dump_json()).raise_for_status()


def _queries(
    settings: Settings, uuids: list[str], now: float
) -> tuple[dict[str, float], dict[str, float]]:
    """The detectors' window queries over every GPU, and one correlator pass, timed, as of
    `now` (the newest sample sent: the windows hold the load's last samples however long the
    teardown took)."""
    old = samples.use(samples.from_settings(settings))
    engine = db.make_engine(settings.database_url)
    factory = db.make_sessionmaker(engine)
    try:
        with factory() as s:
            # A hang check's reads (every 10 s): the spin candidates, then their jobs' windows;
            # and apart, the profile pass's read of every held GPU (each 300 s by default).
            held, _ = hang_detector._job_gpus(s, now)
            t0 = time.perf_counter()
            jobs, _ = hang_detector.check_windows(s, held, settings=settings, now=now)
            t1 = time.perf_counter()
            span = settings.hang_profile_interval_s
            samples.store().field_range(
                s, uuids=uuids, since=now - span, until=now, field="power_w"
            )
            learn_ms = (time.perf_counter() - t1) * 1000
            print(
                f"bench scale: hang check read {len(jobs)} of {len(held)} jobs' windows; "
                f"the profile pass's read of every GPU took {learn_ms:.0f} ms",
                file=sys.stderr,
            )
            cold_ms, t1, t2 = _idle_reads(s, settings, uuids, now)
            print(
                f"bench scale: the idle check's cold read (every GPU's whole window) took "
                f"{cold_ms:.0f} ms; idle_query_ms is a warm pass's read",
                file=sys.stderr,
            )
        with db.unit_of_work(factory) as s:  # the hang, profile and idle passes all due now
            for name in (
                flows.LAST_HANG,
                flows.LAST_IDLE,
                flows.LAST_RESOLVE,
                hang_detector.LEARNED,
            ):
                correlator_service.set_state(s, name=name, value=0.0, now=now)
        t3 = time.perf_counter()
        flows.correlate_once(factory, settings=settings, now=now)
        t4 = time.perf_counter()
        dash = _dashboard(factory, uuids, now)
    finally:
        samples.use(old)
        engine.dispose()
    ms = lambda a, b: round((b - a) * 1000, 1)  # noqa: E731
    return {
        "hang_query_ms": ms(t0, t1),
        "idle_query_ms": ms(t1, t2),
        "correlator_pass_ms": ms(t3, t4),
    }, dash


def _idle_reads(
    s: Session, settings: Settings, uuids: list[str], now: float
) -> tuple[float, float, float]:
    """The idle check's reads of every GPU: a cold pass (the whole window) a minute before
    `now`, then the warm pass at `now` that follows it (the last minute and LATE_S), as every
    pass after the first reads. Returns (cold ms, warm start, warm end)."""
    tracker, iv, thr = (
        idle_detector.IdleTracker(),
        settings.idle_interval_s,
        settings.idle_util_threshold,
    )
    window = idle_detector.window_s(settings)
    before = time.perf_counter()
    tracker.stats(s, uuids, since=now - iv - window, now=now - iv, last_run=None, threshold=thr)
    t1 = time.perf_counter()
    tracker.stats(s, uuids, since=now - window, now=now, last_run=now - iv, threshold=thr)
    return (t1 - before) * 1000, t1, time.perf_counter()


def _dashboard(factory: sessionmaker[Session], uuids: list[str], now: float) -> dict[str, float]:
    """The pages' sample reads, timed (ms): newest sample of every GPU (every field, as the
    read API answers; the grid's five), the fleet heatmap over the last hour, one node's GPU
    trends over the last hour."""
    out = {}
    with factory() as s:
        hour: dict[str, Any] = {"since": now - 3600, "until": now, "bucket_s": 60}
        for name, read in (
            ("latest_all", lambda: queries.latest_gpu_samples(s)),
            ("fleet_grid_latest", lambda: fleet.read_latest(s)),
            ("heatmap_1h", lambda: history.node_utilization(s, **hour)),
            ("node_trends_1h", lambda: history.gpu_series(s, uuids=uuids[:8], **hour)),
        ):
            t0 = time.perf_counter()
            read()
            out[name] = round((time.perf_counter() - t0) * 1000, 1)
    return out


@contextlib.contextmanager
def _stores(backend: str, tmp: Path) -> Iterator[tuple[Settings, Path | None]]:
    sql = "postgres" if backend == "postgres" else "sqlite"
    with db.scratch_database(sql, pg_url=PG_ADMIN_URL, prefix="fleetmedic_scale") as url:
        if backend != "victoriametrics":
            yield Settings(database_url=url, samples_backend="sql"), None
            return
        vm_dir = tmp / "vm"
        with _victoriametrics(vm_dir) as vm_url:
            yield (
                Settings(
                    database_url=url, samples_backend="victoriametrics", victoriametrics_url=vm_url
                ),
                vm_dir,
            )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fleetmedic bench scale")
    p.add_argument("--gpus", type=int, default=100_000)
    p.add_argument("--interval", type=float, default=10.0, help="seconds between a GPU's samples")
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument(
        "--backend", choices=["sqlite", "postgres", "victoriametrics"], default="victoriametrics"
    )
    # Real agents are one connection per node; with few senders each waits for its answer and
    # the bench, not the server, sets the pace (16 held 40k GPUs at 20 s lag where 64 kept 5 s).
    p.add_argument("--senders", type=int, default=64, help="concurrent agent connections")
    p.add_argument("--workers", type=int, default=1, help="server processes (serve --workers)")
    p.add_argument(
        "--push-every",
        type=int,
        default=1,
        help="polls per agent request (an agent's agent_flush_interval_s over --interval)",
    )
    p.add_argument("--server-log", type=Path, help="keep the server's log here (default: dropped)")
    p.add_argument(
        "--rss-every", type=float, default=30.0, help="seconds between per-process RSS samples"
    )
    p.add_argument(
        "--correlator-in-leader",
        action="store_true",
        help="the correlator's passes in the leader itself (correlator_process=false)",
    )
    return p


def _server_env(settings: Settings, args: argparse.Namespace) -> dict[str, str]:
    """The server's environment: the bench's stores, its agent token and where it correlates."""
    return os.environ | {
        "FLEETMEDIC_DATABASE_URL": settings.database_url,
        "FLEETMEDIC_SAMPLES_BACKEND": settings.samples_backend,
        "FLEETMEDIC_VICTORIAMETRICS_URL": settings.victoriametrics_url,
        "FLEETMEDIC_AGENT_TOKENS": TOKEN,
        "FLEETMEDIC_LOG_LEVEL": os.environ.get("FLEETMEDIC_LOG_LEVEL", "WARNING"),
        "FLEETMEDIC_MAX_CONNECTIONS_PER_SOURCE": "1024",
        "FLEETMEDIC_CORRELATOR_PROCESS": "false" if args.correlator_in_leader else "true",
    }


def run(argv: list[str]) -> dict[str, object]:
    """Run the benchmark; returns the figures."""
    args = _parser().parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    fleet = ScaleFleet(args.gpus)
    with (
        tempfile.TemporaryDirectory(prefix="fleetmedic_scale_") as tmp,
        _stores(args.backend, Path(tmp)) as (settings, vm_dir),
    ):
        port = free_port()
        env = _server_env(settings, args)
        cmd = [sys.executable, "-m", "web.cli", "serve", "--port", str(port)]
        cmd += ["--workers", str(args.workers)]
        base = f"http://127.0.0.1:{port}"
        log = str(args.server_log or Path(tmp) / "server.log")
        with process(cmd, f"{base}/healthz", "server", env, log_path=log) as server:
            _setup(fleet, base)
            disk_start, rss_start = _disk_bytes(settings, vm_dir), rss_mb(server.pid)
            index_start = _dir_bytes(vm_dir / "indexdb") if vm_dir is not None else 0
            cpu_start, t0 = _cpu_s(server.pid), time.perf_counter()
            with RssTrace(server.pid, args.rss_every) as trace:
                load = run_load(fleet, base_url=base, token=TOKEN, interval_s=args.interval,
                                seconds=args.minutes * 60, senders=args.senders,
                                push_every=args.push_every)  # fmt: skip
            elapsed = time.perf_counter() - t0
            rss_end, server_cpu = rss_mb(server.pid), _cpu_s(server.pid) - cpu_start
        disk = _disk_bytes(settings, vm_dir) - disk_start
        index = _dir_bytes(vm_dir / "indexdb") - index_start if vm_dir is not None else None
        timings, dash = _queries(settings, [g.uuid for g in fleet.sim.gpus], load.last_ts)
        _say_warnings(Path(log))
    lags = sorted(load.lags) or [float("nan")]
    out: dict[str, object] = {
        "gpus": len(fleet.sim.gpus),
        "backend": args.backend,
        "samples_per_s": round(load.samples / elapsed),
        "ingest_lag_p95_s": round(lags[int(0.95 * (len(lags) - 1))], 2),
        "ingest_lag_max_s": round(lags[-1], 2),
        "rss_start_mb": round(rss_start, 1),
        "rss_end_mb": round(rss_end, 1),
        "disk_bytes_per_sample": round(disk / max(load.samples, 1), 1),
        **timings,
    }
    # The JSON line holds the keys exactly; the run's particulars go to stderr.
    print(
        f"bench scale: {load.samples} samples in {elapsed:.0f} s, {load.requests} requests, "
        f"{load.errors} refused or failed (retried), server CPU {server_cpu:.0f} s "
        f"({1000 * server_cpu / max(load.requests, 1):.1f} ms per request), "
        f"interval {args.interval} s, {args.push_every} poll(s) per request, "
        f"{args.senders} senders, {args.workers} server workers, {os.cpu_count()} cpus, "
        f"correlator in {'the leader' if args.correlator_in_leader else 'a child process'}; "
        f"dashboard reads (ms): {dash}" + _index_note(index, load.samples),
        file=sys.stderr,
    )
    print(f"bench scale: RSS per server process: {trace.summary()}", file=sys.stderr)
    return out
