"""What the benchmarks share for the processes they start: ports, readiness, memory, PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import IO

import httpx
import psutil

# Where a benchmark makes its scratch PostgreSQL databases.
PG_ADMIN_URL = os.environ.get(
    "FLEETMEDIC_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(log: IO[bytes], limit: int = 2000) -> str:
    log.seek(0, os.SEEK_END)
    log.seek(max(log.tell() - limit, 0))
    return log.read().decode(errors="replace")


def _wait(
    url: str, proc: subprocess.Popen[bytes], log: IO[bytes], what: str, ready_s: float
) -> None:
    deadline = time.monotonic() + ready_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited: {_tail(log)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready in {ready_s:.0f} s")


@contextlib.contextmanager
def process(
    cmd: list[str],
    ready: str,
    what: str,
    env: dict[str, str] | None = None,
    ready_s: float = 90,
    log_path: str | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `cmd` until the block ends, once `ready` answers 200 (its stderr kept for errors,
    and in `log_path` when given)."""
    # stderr goes to a file, not a pipe: a pipe nobody reads during the run fills at 64 KiB
    # and then every log line blocks the process (a 100k-GPU server's warnings stalled it).
    opened = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()  # noqa: SIM115
    with opened as log:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            _wait(ready, proc, log, what, ready_s)
            yield proc
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)
    if proc.poll() is None:
        proc.kill()


def rss_by_pid(pid: int) -> dict[int, float]:
    """Resident memory of a process and each of its children, in MiB (a child that ended
    while being read is left out)."""
    p = psutil.Process(pid)
    out = {}
    for c in [p, *p.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            out[c.pid] = c.memory_info().rss / 2**20
    return out


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, in MiB."""
    return sum(rss_by_pid(pid).values())


class RssTrace:
    """Samples the resident memory of a process and each of its children on a thread.

    One figure for the whole tree hides which process grows: at 100k GPUs the leading worker
    climbed while the other held flat, and only per-process samples showed it.
    """

    def __init__(self, pid: int, every_s: float = 30.0) -> None:
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[float, dict[int, float]]] = []  # (seconds in, pid -> MiB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-trace", daemon=True)

    def __enter__(self) -> RssTrace:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.every_s):
                return

    def sample(self) -> None:
        """Record each process's RSS now (a process that just ended is left out)."""
        with contextlib.suppress(psutil.Error):
            self.samples.append((time.monotonic() - self._started, rss_by_pid(self.pid)))

    def summary(self) -> str:
        """Per process: RSS at each sample in MiB, with its minimum and maximum over the run."""
        pids = sorted({pid for _, by_pid in self.samples for pid in by_pid})
        parts = []
        for pid in pids:
            seen = [round(by_pid[pid]) for _, by_pid in self.samples if pid in by_pid]
            parts.append(f"pid {pid}: min {min(seen)} max {max(seen)} MiB, every "
                         f"{self.every_s:.0f} s: {seen}")  # fmt: skip
        return "; ".join(parts)


def loop_ms(runs: int = 3) -> float:
    """This machine's speed now: the median ms of a fixed pure-Python loop over `runs` runs.

    The shared VM these figures come from ran the same code up to twice as slow from one hour
    or day to the next (and this loop from 115 to 254 ms within seconds); a benchmark's line
    carries it so that figures from different runs can be told apart by the machine's state.
    """
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i % 7
        times.append((time.perf_counter() - started) * 1000)
    return round(sorted(times)[len(times) // 2], 1)
