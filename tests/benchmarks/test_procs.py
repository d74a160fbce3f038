"""The benchmarks' process helper: a server that logs a lot never stalls on its own stderr."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import httpx
import psutil
import pytest

from benchmarks._procs import RssTrace, free_port, process


def test_a_process_that_writes_megabytes_to_stderr_keeps_answering() -> None:
    # 64 KiB fill a pipe; a benchmark reads its server's stderr only when it fails to start.
    port = free_port()
    script = textwrap.dedent(f"""
        import http.server, sys
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                sys.stderr.write("w" * 1_000_000 + "\\n"); sys.stderr.flush()
                self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
            def log_message(self, *a): pass
        http.server.HTTPServer(("127.0.0.1", {port}), H).serve_forever()
    """)
    url = f"http://127.0.0.1:{port}/"
    with process([sys.executable, "-c", script], url, "noisy server"):
        for _ in range(3):  # 3 MB written while nobody reads them
            assert httpx.get(url, timeout=10).text == "ok"


def test_a_process_that_exits_before_ready_is_reported_with_its_stderr() -> None:
    cmd = [sys.executable, "-c", "import sys; sys.exit('no config here')"]
    url = f"http://127.0.0.1:{free_port()}/"
    with pytest.raises(RuntimeError, match="no config here"), process(cmd, url, "broken server"):
        pass


def test_the_rss_trace_follows_each_process_of_a_tree_apart() -> None:
    # A parent holding ~1 MiB whose child grows 60 MiB: one figure for the tree would hide who.
    child = "import time; b = bytearray(60 * 2**20); time.sleep(30)"
    parent = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(30)"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent])
    try:
        time.sleep(1.5)
        with RssTrace(proc.pid, every_s=0.2) as trace:
            time.sleep(0.7)
    finally:
        for c in psutil.Process(proc.pid).children(recursive=True):
            c.kill()
        proc.kill()
    assert len(trace.samples) >= 3
    last = trace.samples[-1][1]
    assert set(last) >= {proc.pid} and len(last) == 2
    kid = next(pid for pid in last if pid != proc.pid)
    assert last[kid] - last[proc.pid] > 50
    summary = trace.summary()
    assert f"pid {proc.pid}: min" in summary and f"pid {kid}: min" in summary
