"""The benchmarks' process helper: a server that logs a lot never stalls on its own stderr."""

from __future__ import annotations

import sys
import textwrap

import httpx
import pytest

from benchmarks._procs import free_port, process


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
