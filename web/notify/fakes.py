"""Local receivers for tests and the demo: an HTTP receiver (Slack, webhook) and an SMTP one.

The HTTP receiver keeps every POSTed JSON body and shows them at GET / (escaped: alerts carry a
cluster user's text). It can fail the next N requests to exercise retries.
"""

from __future__ import annotations

import html
import json
import socket
import threading
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    body: Any


@dataclass
class _State:
    received: list[Received] = field(default_factory=list)
    fail_next: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(min(size, 8 * 1024 * 1024))
            with state.lock:
                failing = state.fail_next > 0
                if failing:
                    state.fail_next -= 1
                else:
                    state.received.append(Received(self.path, json.loads(raw or b"null")))
            self.send_response(503 if failing else 200)
            self.send_header("content-type", "text/plain")
            self.end_headers()
            self.wfile.write(b"unavailable" if failing else b"ok")

        def do_GET(self) -> None:
            with state.lock:
                items = list(reversed(state.received))
            rows = "".join(
                f"<h3>{html.escape(r.path)}</h3>"
                f"<pre>{html.escape(json.dumps(r.body, indent=2))}</pre>"
                for r in items
            )
            title = f"<title>alerts received</title><h2>{len(items)} alerts received</h2>"
            body = f"<!doctype html>{title}{rows}"
            data = body.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class HttpReceiver:
    """A JSON-receiving HTTP server on a free loopback port, in a thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = _State()
        self.server = ThreadingHTTPServer((host, port), _handler(self.state))
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HttpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> HttpReceiver:
        """Serve in the background."""
        self.thread.start()
        return self

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, n: int) -> None:
        """Answer the next n POSTs with 503."""
        with self.state.lock:
            self.state.fail_next = n

    @property
    def received(self) -> list[Received]:
        """Every stored request, oldest first."""
        with self.state.lock:
            return list(self.state.received)


def free_port() -> int:
    """A free loopback TCP port (for servers that cannot bind port 0 themselves)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SmtpReceiver:
    """aiosmtpd on a free loopback port, keeping every message (aiosmtpd is a test dependency)."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.handlers import Message as MessageHandler

        self.messages: list[Message] = []
        outer = self

        class Keep(MessageHandler):
            def handle_message(self, message: Message) -> None:
                outer.messages.append(message)

        self.port = free_port()
        self.controller = Controller(Keep(), hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> SmtpReceiver:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()
