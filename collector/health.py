"""Per-source health: parse failures and errors are counted and logged once per reason."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

log = logging.getLogger(__name__)

# The registry of every SourceHealth made in this process, for /metrics and `agent status`.
_REGISTRY: list[SourceHealth] = []
_REGISTRY_LOCK = threading.Lock()


@dataclass
class SourceHealth:
    """Counters of one source instance. Thread-safe; cheap on the hot path."""

    source: str
    parse_failures: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None
    _logged: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        with _REGISTRY_LOCK:
            _REGISTRY.append(self)

    def parse_failure(self, reason: str, sample: str = "", *, count: int = 1) -> None:
        """Count `count` lines or records that could not be parsed; log the first of each
        reason."""
        with self._lock:
            self.parse_failures[reason] += count
            first = reason not in self._logged
            self._logged.add(reason)
        if first:
            log.warning("%s: cannot parse (%s): %.200r", self.source, reason, sample)

    def error(self, reason: str, exc: BaseException | None = None) -> None:
        """Count a failed read (command timeout, NVML error, HTTP error); log the first."""
        text = f"{reason}: {exc}" if exc is not None else reason
        with self._lock:
            self.errors[reason] += 1
            self.last_error = text
            first = ("err:" + reason) not in self._logged
            self._logged.add("err:" + reason)
        if first:
            log.warning("%s: %s", self.source, text)

    def total_parse_failures(self) -> int:
        """All parse failures of this source."""
        return sum(self.parse_failures.values())

    def total_errors(self) -> int:
        """All read errors of this source."""
        return sum(self.errors.values())


def all_health() -> list[SourceHealth]:
    """Every SourceHealth made in this process."""
    with _REGISTRY_LOCK:
        return list(_REGISTRY)


def http_ok(health: SourceHealth, send: Callable[[], httpx.Response]) -> httpx.Response | None:
    """The response of `send()` when it is a 200; a timeout, transport error or other status
    is counted on `health` (never raised) and gives None."""
    try:
        resp = send()
    except httpx.TimeoutException as exc:
        health.error("http_timeout", exc)
        return None
    except httpx.HTTPError as exc:
        health.error("http_error", exc)
        return None
    if resp.status_code != 200:
        health.error(f"http_{resp.status_code}")
        return None
    return resp
