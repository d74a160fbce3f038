"""Slow and stalled clients cannot hold the server: timeouts and connection caps per process.

uvicorn has a keep-alive timeout and a graceful-shutdown timeout, but no limit on how long a
client may take to send a request's headers or its body, and no cap on connections from one
address. GuardedHttpToolsProtocol (uvicorn's httptools protocol plus these) closes a
connection whose headers are not complete within `header_timeout_s`, answers 408 to a body not
complete within `body_timeout_s` of the headers, and closes at once a new connection over
`max_connections` or over `max_connections_per_source` from one address. Exposed to the
internet, run behind a reverse proxy as well (README, "Behind a reverse proxy").
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from timeline.settings import Settings

log = logging.getLogger(__name__)

PROTOCOL = "web.serving:GuardedHttpToolsProtocol"  # uvicorn's `http` (importable by workers)
_SLOW_BODY = b"request body arrived too slowly"
_TIMEOUT_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_SLOW_BODY), _SLOW_BODY)
)


@dataclass(frozen=True)
class Limits:
    """What one client may hold: time to send a request, connections (0: no cap)."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    max_connections: int = 2048
    max_per_source: int = 256

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The limits the settings give."""
        return cls(
            header_timeout_s=settings.header_timeout_s,
            body_timeout_s=settings.body_timeout_s,
            max_connections=settings.max_connections,
            max_per_source=settings.max_connections_per_source,
        )


class _Warnings:
    """One warning per reason a minute, however many clients misbehave."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.count: Counter[str] = Counter()

    def warn(self, reason: str, source: str) -> None:
        self.count[reason] += 1
        now = time.monotonic()
        if now - self.last.get(reason, -60.0) >= 60.0:
            self.last[reason] = now
            log.warning(
                "%s (from %s; %d so far in this process)", reason, source, self.count[reason]
            )


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header/body timeouts and connection caps."""

    limits: ClassVar[Limits] = Limits()
    open_by_source: ClassVar[Counter[str]] = Counter()  # this process's event loop only
    warnings: ClassVar[_Warnings] = _Warnings()

    @classmethod
    def configure(cls, limits: Limits) -> None:
        """Set the limits of every connection this process accepts from now on."""
        cls.limits = limits

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Count the connection; close it at once when over a cap, else start its header clock."""
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._source = self.client[0] if self.client else "?"
        self.open_by_source[self._source] += 1
        self._counted = True
        lim = self.limits
        if lim.max_connections and len(self.connections) > lim.max_connections:
            self.warnings.warn("over max_connections: new connections closed", self._source)
            transport.close()
        elif lim.max_per_source and self.open_by_source[self._source] > lim.max_per_source:
            self.warnings.warn("over max_connections_per_source: connection closed", self._source)
            transport.close()
        else:
            self._arm(lim.header_timeout_s, "headers")

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection (and its clock)."""
        self._disarm()
        if getattr(self, "_counted", False):
            self._counted = False
            self.open_by_source[self._source] -= 1
            if self.open_by_source[self._source] <= 0:
                del self.open_by_source[self._source]
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        """A request starts (also the next one on a kept-alive connection): headers due."""
        super().on_message_begin()
        if self._deadline is None:
            self._arm(self.limits.header_timeout_s, "headers")

    def on_headers_complete(self) -> None:
        """Headers in: now the body is due (a request without one completes at once)."""
        self._disarm()
        super().on_headers_complete()
        self._arm(self.limits.body_timeout_s, "body")

    def on_message_complete(self) -> None:
        """The whole request is in: no clock until the next one begins."""
        self._disarm()
        super().on_message_complete()

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        if seconds > 0 and not self.transport.is_closing():
            self._deadline = self.loop.call_later(seconds, self._expired, what)

    def _disarm(self) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
            self._deadline = None

    def _expired(self, what: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self.warnings.warn(f"request {what} too slow: connection closed", self._source)
        if what == "body" and self.cycle is not None and not self.cycle.response_started:
            self.transport.write(_TIMEOUT_408)
        self.transport.close()


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (one descriptor per connection);
    returns (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-files limit from %d: %s", soft, exc)
            return soft, soft
    return soft, max(soft, target)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The uvicorn options that bound what clients can hold, from the settings."""
    return {
        "http": PROTOCOL,
        "timeout_keep_alive": max(1, round(settings.keepalive_timeout_s)),
        "timeout_graceful_shutdown": max(1, round(settings.shutdown_timeout_s)),
        "limit_concurrency": settings.max_connections or None,
    }
