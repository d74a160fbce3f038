"""`fleetmedic bench ingest`: GPU samples per second through the real server over HTTP.

The server (uvicorn, `fleetmedic serve`) runs in its own process; the load generator in this one,
posting batches of 1,000 GPU samples from a few concurrent connections.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid

import httpx

from benchmarks._procs import PG_ADMIN_URL, free_port, process, rss_mb
from timeline import db
from timeline.models import Batch, Sample

TOKEN = "bench-token"


def _database(backend: str) -> contextlib.AbstractContextManager[str]:
    return db.scratch_database(backend, pg_url=PG_ADMIN_URL, prefix="fleetmedic_bench")


def _server(
    database_url: str, port: int, workers: int
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    env = os.environ | {
        "FLEETMEDIC_DATABASE_URL": database_url,
        "FLEETMEDIC_AGENT_TOKENS": TOKEN,
        "FLEETMEDIC_LOG_LEVEL": "WARNING",
    }
    cmd = [sys.executable, "-m", "web.cli", "serve", "--port", str(port), "--workers", str(workers)]
    return process(cmd, f"http://127.0.0.1:{port}/healthz", "server", env, ready_s=60)


def make_body(node: int, gpus: int, now: float) -> bytes:
    """One batch of `gpus` samples (1,000 by default) from node `node`, as JSON bytes."""
    batch = Batch(
        agent=f"bench-{node}",
        node=f"bench-node-{node:05d}",
        batch_id="B" * 32,
        samples=[
            Sample(
                ts=now,
                gpu_uuid=f"GPU-{node:05d}-{i:04d}",
                util_gpu=93.0,
                util_mem=8.0,
                mem_used_mb=61234.0,
                mem_total_mb=81559.0,
                power_w=525.4,
                temp_gpu=55.0,
                temp_mem=60.0,
                sm_clock_mhz=1980.0,
                clock_event_reasons=0,
            )
            for i in range(gpus)
        ],
    )
    return batch.model_dump_json(exclude_none=True).encode()


def _load(port: int, seconds: float, concurrency: int, per_batch: int) -> tuple[int, list[float]]:
    # Every batch a new instant (1 ms apart): a store keyed by (GPU, time) must write each one.
    base = round(time.time() - 60.0, 3)
    template = make_body(0, per_batch, base)
    stamp = f'"ts":{base!r}'.encode()
    assert template.count(stamp) == per_batch, "the template's timestamps must be replaceable"
    latencies: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    counter = iter(range(1, 1 << 40))

    def worker(w: int) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
            n = 0
            while time.monotonic() < stop_at:
                with lock:
                    k = next(counter)
                body = template.replace(b"B" * 32, uuid.uuid4().hex.encode()).replace(
                    stamp, f'"ts":{base + k / 1000:.3f}'.encode()
                )
                t0 = time.perf_counter()
                r = c.post("/api/v1/ingest", content=body)
                r.raise_for_status()
                with lock:
                    latencies.append((time.perf_counter() - t0) * 1000)
                n += 1

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies) * per_batch, latencies


def run(argv: list[str]) -> dict[str, object]:
    """Run the benchmark; returns the figures."""
    p = argparse.ArgumentParser(prog="fleetmedic bench ingest")
    p.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=3)
    p.add_argument("--batch", type=int, default=1000, help="GPU samples per batch")
    p.add_argument("--workers", type=int, default=1, help="server processes (serve --workers)")
    args = p.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise here
    port = free_port()
    with _database(args.backend) as url, _server(url, port, args.workers) as proc:
        _load(port, 1.0, args.concurrency, args.batch)  # warm-up: imports, pools, page cache
        t0 = time.perf_counter()
        samples, latencies = _load(port, args.seconds, args.concurrency, args.batch)
        elapsed = time.perf_counter() - t0
        rss = rss_mb(proc.pid)
    latencies.sort()
    return {
        "backend": args.backend,
        "gpu_samples_per_s": round(samples / elapsed),
        "p95_batch_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
        "median_batch_ms": round(statistics.median(latencies), 1),
        "batches": len(latencies),
        "samples_per_batch": args.batch,
        "concurrency": args.concurrency,
        "workers": args.workers,
        "server_rss_mb": round(rss, 1),
        "cpus": os.cpu_count(),
    }
