"""Delivery of spooled batches to the server's ingest API: retries, splits and quarantine.

At least once: a batch leaves the spool only when the server answered 200 for its batch_id
(stored now, or a duplicate it already had). Transient failures (connection errors, 5xx, 408,
429) are retried with exponential backoff and jitter; the batch stays spooled between rounds.
401/403 stop delivery (the token is wrong; retrying cannot help) and are logged loudly;
413 splits the batch; 422 and other client errors quarantine it in the spool's dead letters.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_when_event_set,
    wait_exponential_jitter,
)

from collector.spool import Spool, SpoolBatch

log = logging.getLogger(__name__)

INGEST_PATH = "/api/v1/ingest"
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_AUTH_STATUS = frozenset({401, 403})


class Outcome(enum.StrEnum):
    """What one delivery round did."""

    EMPTY = "empty"  # nothing spooled
    DELIVERED = "delivered"  # acked (stored or duplicate)
    RETRY_LATER = "retry_later"  # transient failures exhausted this round; batch kept
    SPLIT = "split"  # 413: replaced by two halves
    QUARANTINED = "quarantined"  # 4xx the server will never accept; moved to dead letters
    AUTH_FAILED = "auth_failed"  # 401/403: stopped until the token changes


class _Transient(Exception):
    """A failure worth retrying (connection error, 5xx, 408, 429)."""


@dataclass
class DeliveryStats:
    """Counters of one Delivery, for logs and the agent's health."""

    batches_delivered: int = 0
    duplicates: int = 0
    items_delivered: int = 0
    transient_failures: int = 0
    splits: int = 0
    quarantined: int = 0
    auth_failures: int = 0
    last_status: int | None = None
    last_error: str | None = None


class Delivery:
    """Drains a Spool into POST {server}/api/v1/ingest with a bearer token."""

    def __init__(
        self,
        *,
        spool: Spool,
        server_url: str,
        token: str,
        agent: str,
        node: str,
        client: httpx.Client | None = None,
        max_batch_items: int = 5000,
        max_batch_bytes: int = 4 * 1024 * 1024,
        attempts_per_round: int = 5,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        timeout_s: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.spool = spool
        self.url = server_url.rstrip("/") + INGEST_PATH
        self.agent = agent
        self.node = node
        self.max_batch_items = max_batch_items
        self.max_batch_bytes = max_batch_bytes
        self.stats = DeliveryStats()
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        # Loading the CA bundle costs ~2 MB of RSS; a plain-http server URL never needs it.
        https = server_url.lower().startswith("https")
        self._client = client or httpx.Client(timeout=timeout_s, verify=https)
        self._attempts = attempts_per_round
        self._wait = wait_exponential_jitter(multiplier=backoff_initial_s, max=backoff_max_s)
        self._retrying = self._make_retrying(sleep, None)
        self._auth_logged = False

    def _make_retrying(
        self, sleep: Callable[[float], Any], stop_event: threading.Event | None
    ) -> Retrying:
        stop: Any = stop_after_attempt(self._attempts)
        if stop_event is not None:
            stop = stop | stop_when_event_set(stop_event)
        return Retrying(
            retry=retry_if_exception_type(_Transient),
            stop=stop,
            wait=self._wait,
            sleep=sleep,
            reraise=False,
        )

    def interrupt_on(self, event: threading.Event) -> None:
        """Backoff sleeps end, and no new attempt starts, once `event` is set (shutdown)."""
        self._retrying = self._make_retrying(event.wait, event)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def deliver_once(self) -> Outcome:
        """Send the oldest pending batch (forming one if needed) and act on the answer."""
        batch = self.spool.take(max_items=self.max_batch_items, max_bytes=self.max_batch_bytes)
        if batch is None:
            return Outcome.EMPTY
        try:
            response = self._retrying(self._post, batch)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            log.warning("delivery of batch %s failed this round: %s", batch.batch_id, last)
            return Outcome.RETRY_LATER
        return self._handle(batch, response)

    def drain(self, *, stop: threading.Event | None = None, max_rounds: int = 1_000_000) -> Outcome:
        """Deliver until the spool is empty or a round fails; returns the last outcome."""
        outcome = Outcome.EMPTY
        for _ in range(max_rounds):
            if stop is not None and stop.is_set():
                break
            outcome = self.deliver_once()
            if outcome not in (Outcome.DELIVERED, Outcome.SPLIT, Outcome.QUARANTINED):
                break
        return outcome

    def _post(self, batch: SpoolBatch) -> httpx.Response:
        try:
            response = self._client.post(
                self.url,
                content=batch.body(agent=self.agent, node=self.node),
                headers=self._headers,
            )
        except httpx.TransportError as exc:
            self.stats.transient_failures += 1
            self.stats.last_error = f"{exc.__class__.__name__}: {exc}"
            raise _Transient(self.stats.last_error) from exc
        self.stats.last_status = response.status_code
        if response.status_code in _TRANSIENT_STATUS:
            self.stats.transient_failures += 1
            self.stats.last_error = f"HTTP {response.status_code}"
            raise _Transient(self.stats.last_error)
        return response

    def _handle(self, batch: SpoolBatch, response: httpx.Response) -> Outcome:
        status = response.status_code
        if 200 <= status < 300:
            return self._acked(batch, response)
        if status in _AUTH_STATUS:
            self.stats.auth_failures += 1
            if not self._auth_logged:
                # Never log the token itself; the status and the server's words are enough.
                log.error(
                    "SERVER REFUSED THE AGENT TOKEN (HTTP %s: %s); delivery stopped, spooling "
                    "continues. Fix --token / FLEETMEDIC_AGENT_TOKEN.",
                    status,
                    _detail(response),
                )
                self._auth_logged = True
            return Outcome.AUTH_FAILED
        self._auth_logged = False
        if status == 413 and batch.size() > 1:
            halves = self.spool.split(batch.batch_id)
            self.stats.splits += 1
            log.info(
                "batch %s too large (%d items); split into %s", batch.batch_id, batch.size(), halves
            )
            return Outcome.SPLIT
        detail = _detail(response)
        self.spool.quarantine(batch.batch_id, status=status, detail=detail)
        self.stats.quarantined += 1
        log.error("batch %s refused (HTTP %s), quarantined: %s", batch.batch_id, status, detail)
        return Outcome.QUARANTINED

    def _acked(self, batch: SpoolBatch, response: httpx.Response) -> Outcome:
        try:
            answer = response.json()
            duplicate = bool(answer.get("duplicate", False))
            if answer.get("batch_id") not in (None, batch.batch_id):
                log.warning("server acked %s for batch %s", answer.get("batch_id"), batch.batch_id)
        except ValueError:
            duplicate = False
        self._auth_logged = False
        n = self.spool.ack(batch.batch_id)
        self.stats.batches_delivered += 1
        self.stats.items_delivered += n
        self.stats.duplicates += int(duplicate)
        return Outcome.DELIVERED


def _detail(response: httpx.Response) -> str:
    """The server's reason, short, for logs and the dead-letter table."""
    try:
        body = response.json()
        detail = body.get("detail", body) if isinstance(body, dict) else body
        return str(detail)[:2000]
    except ValueError:
        return response.text[:2000]
