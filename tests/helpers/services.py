"""Real services for tests: our app under uvicorn in a thread, and Debian's Prometheus,
Alertmanager and VictoriaMetrics as child processes on free loopback ports, each in a temporary
directory.

A missing binary skips loudly, or fails where REQUIRE_PROMETHEUS / REQUIRE_ALERTMANAGER /
REQUIRE_VICTORIAMETRICS is 1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from web.notify.fakes import free_port


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """The app under a real uvicorn on a free loopback port; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def binary(names: tuple[str, ...], flag: str, package: str) -> str:
    """The first of `names` on PATH, else skip (or fail when `flag`=1)."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    reason = f"no {names[0]} on PATH (Debian package {package}; tests/system_deps.sh installs it)"
    if os.environ.get(flag) == "1":
        pytest.fail(f"{flag}=1 but {reason}")
    pytest.skip(f"SKIPPED ({reason})")


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready in 30 s: {log.read_text()[-2000:]}")


@contextmanager
def _process(cmd: list[str], ready_url: str, workdir: Path) -> Iterator[None]:
    log = workdir / "process.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    try:
        _wait_ready(ready_url, proc, log)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def alertmanager(workdir: Path) -> Iterator[str]:
    """A real Alertmanager (no clustering, a null receiver); yields its base URL."""
    exe = binary(
        ("prometheus-alertmanager", "alertmanager"),
        "REQUIRE_ALERTMANAGER",
        "prometheus-alertmanager",
    )
    config = workdir / "alertmanager.yml"
    config.write_text("route:\n  receiver: 'null'\n  group_wait: 1s\nreceivers:\n- name: 'null'\n")
    port = free_port()
    cmd = [
        exe,
        f"--config.file={config}",
        f"--storage.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    url = f"http://127.0.0.1:{port}"
    with _process(cmd, f"{url}/-/ready", workdir):
        yield url


@contextmanager
def prometheus(workdir: Path, *, target: str, interval_s: float = 1.0) -> Iterator[str]:
    """A real Prometheus scraping `target` (host:port) /metrics; yields its base URL."""
    exe = binary(("prometheus",), "REQUIRE_PROMETHEUS", "prometheus")
    config = workdir / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {interval_s:g}s\n  scrape_timeout: {interval_s:g}s\n"
        f"scrape_configs:\n- job_name: fleetmedic\n  static_configs:\n  - targets: ['{target}']\n"
    )
    port = free_port()
    cmd = [
        exe,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    url = f"http://127.0.0.1:{port}"
    with _process(cmd, f"{url}/-/ready", workdir):
        yield url


@contextmanager
def victoriametrics(
    workdir: Path, *, port: int | None = None, flags: tuple[str, ...] = ()
) -> Iterator[str]:
    """A real single-node VictoriaMetrics with its storage in `workdir`; yields its base URL.

    Queries see samples as soon as they are flushed (no latency offset, no result cache: the
    tests write into the past, which VictoriaMetrics would otherwise cache as settled), and a
    sample written twice (a batch replayed after a partial failure) is stored once.
    """
    exe = binary(("victoria-metrics",), "REQUIRE_VICTORIAMETRICS", "victoria-metrics")
    port = port or free_port()
    cmd = [
        exe,
        f"-storageDataPath={workdir / 'vmdata'}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-search.latencyOffset=0s",
        "-search.disableCache",
        "-dedup.minScrapeInterval=1ms",
        "-retentionPeriod=100y",
        *flags,
    ]
    url = f"http://127.0.0.1:{port}"
    with _process(cmd, f"{url}/health", workdir):
        yield url
