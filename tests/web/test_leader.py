"""One leader per database per host: only it runs the periodic work; a waiting one takes over."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from web.leader import LeaderLock


def _wait(pred: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_only_one_lock_holder_leads_and_a_waiter_takes_over_when_it_stops(tmp_path: Path) -> None:
    path = tmp_path / "leader.lock"
    calls: list[str] = []
    first = LeaderLock(path, lambda: calls.append("first"))
    second = LeaderLock(path, lambda: calls.append("second"))
    first.start()
    assert _wait(first.elected.is_set)
    second.start()
    time.sleep(1.5)  # the waiter polls every second: give it the chance to (wrongly) lead
    assert calls == ["first"] and not second.elected.is_set()
    first.stop()
    assert _wait(second.elected.is_set, timeout=5.0)
    assert calls == ["first", "second"]
    second.stop()


@pytest.mark.slow
@pytest.mark.integration
def test_two_worker_server_ingests_and_exactly_one_worker_leads(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {
        "FLEETMEDIC_DATABASE_URL": f"sqlite:///{tmp_path / 'fm.db'}",
        "FLEETMEDIC_DATA_DIR": str(tmp_path),
        "FLEETMEDIC_AGENT_TOKENS": "tok",
    }
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "web.cli", "serve", "--port", str(port), "--workers", "2"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        assert _wait(lambda: _healthy(url), timeout=60), log.read_text()[-3000:]
        for i in range(6):
            batch = {"agent": "a", "node": "n1", "batch_id": f"leader-test-{i:04d}",
                     "samples": [{"ts": 1.0 + i, "gpu_uuid": "GPU-1", "util_gpu": 50}]}  # fmt: skip
            r = httpx.post(
                f"{url}/api/v1/ingest", json=batch, headers={"Authorization": "Bearer tok"}
            )
            assert r.status_code == 200, r.text
        assert _wait(lambda: "leads" in log.read_text(), timeout=10)
        time.sleep(2.5)  # the other worker polls the lock every second
        assert log.read_text().count("leads: it runs the sources") == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
