"""Delivery of spooled batches to the server's ingest API: retries, bisection, dead letters.

At least once: a batch leaves the spool only when the server answered 200 for its batch_id
(stored now, or a duplicate it already had); the items it rejected in that answer go to the
spool's dead letters. Transient failures (connection errors, 5xx, 408, 429) are retried with
exponential backoff and jitter, or after the server's Retry-After; the batch stays spooled
between rounds. 401/403 stop delivery (the token is wrong; retrying cannot help) and are
logged loudly; 413 splits the batch.

No poison pill: a batch the server refuses (another 4xx), or one that keeps getting a server
error (5xx but 503) `bisect_after` times while the server says it can write (/readyz), is split
in halves until the one bad item is alone; that item goes to the dead letters with the
server's answer, and the rest flows. Each dead letter also becomes an `agent` event, so the
server shows which node's agent is dead-lettering.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_when_event_set,
    wait_exponential_jitter,
)

from collector.base import Observations
from collector.spool import Spool, SpoolBatch
from timeline.bounds import clean_text
from timeline.models import Event, EventKind, Severity

log = logging.getLogger(__name__)

INGEST_PATH = "/api/v1/ingest"
READY_PATH = "/readyz"
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_BUSY_STATUS = frozenset({408, 425, 429, 503})  # the server is busy, not failing on this batch
_AUTH_STATUS = frozenset({401, 403})
MAX_RETRY_AFTER_S = 600.0  # a Retry-After longer than this is capped (a broken proxy)


class Outcome(enum.StrEnum):
    """What one delivery round did."""

    EMPTY = "empty"  # nothing spooled
    DELIVERED = "delivered"  # acked (stored or duplicate); rejected items dead-lettered
    RETRY_LATER = "retry_later"  # transient failures exhausted this round; batch kept
    SPLIT = "split"  # 413, or isolating a bad item: replaced by two halves
    QUARANTINED = "quarantined"  # what the server will never accept: moved to dead letters
    AUTH_FAILED = "auth_failed"  # 401/403: stopped until the token changes


class _Transient(Exception):
    """A failure worth retrying (connection error, 5xx, 408, 429)."""

    def __init__(self, text: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(text)
        self.status = status
        self.retry_after = retry_after


@dataclass
class DeliveryStats:
    """Counters of one Delivery, for logs and the agent's health."""

    batches_delivered: int = 0
    duplicates: int = 0
    items_delivered: int = 0
    transient_failures: int = 0
    splits: int = 0
    bisections: int = 0  # splits made to isolate an item the server refuses
    quarantined: int = 0
    dead_lettered_items: int = 0  # rejected in an answer, or isolated and refused
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
        bisect_after: int = 5,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        timeout_s: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.spool = spool
        base = server_url.rstrip("/")
        self.url, self.ready_url = base + INGEST_PATH, base + READY_PATH
        self.agent = agent
        self.node = node
        self.max_batch_items = max_batch_items
        self.max_batch_bytes = max_batch_bytes
        self.bisect_after = bisect_after
        self.stats = DeliveryStats()
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        # Loading the CA bundle costs ~2 MB of RSS; a plain-http server URL never needs it.
        https = server_url.lower().startswith("https")
        self._client = client or httpx.Client(timeout=timeout_s, verify=https)
        self._attempts = attempts_per_round
        self._backoff = wait_exponential_jitter(multiplier=backoff_initial_s, max=backoff_max_s)
        self._retrying = self._make_retrying(sleep, None)
        self._auth_logged = False
        self._clock = clock
        self._not_before = 0.0  # the server's Retry-After, on the wall clock

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

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it gave one, else exponential backoff with jitter."""
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, _Transient) and exc.retry_after is not None:
            return exc.retry_after
        return float(self._backoff(state))

    def interrupt_on(self, event: threading.Event) -> None:
        """Backoff sleeps end, and no new attempt starts, once `event` is set (shutdown)."""
        self._retrying = self._make_retrying(event.wait, event)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def deliver_once(self) -> Outcome:
        """Send the oldest pending batch (forming one if needed) and act on the answer."""
        if self._clock() < self._not_before:
            return Outcome.RETRY_LATER  # the server asked us to wait
        batch = self.spool.take(max_items=self.max_batch_items, max_bytes=self.max_batch_bytes)
        if batch is None:
            return Outcome.EMPTY
        try:
            response = self._retrying(self._post, batch)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            log.warning("delivery of batch %s failed this round: %s", batch.batch_id, last)
            if isinstance(last, _Transient):
                if last.retry_after is not None:
                    self._not_before = self._clock() + last.retry_after
                failures = self.spool.record_failure(batch.batch_id) if _failing(last) else 0
                if failures >= self.bisect_after and self._server_ready():
                    return self._isolate(batch, last.status, str(last))
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
            self.stats.last_error = f"HTTP {response.status_code}: {_detail(response)[:300]}"
            raise _Transient(self.stats.last_error, response.status_code, _retry_after(response))
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
        if status == 409:  # this batch_id holds other content there: re-sending would duplicate
            return self._dead_letter(batch, status, _detail(response))
        if status == 413 and batch.size() > 1:
            halves = self.spool.split(batch.batch_id)
            self.stats.splits += 1
            log.info(
                "batch %s too large (%d items); split into %s", batch.batch_id, batch.size(), halves
            )
            return Outcome.SPLIT
        return self._isolate(batch, status, _detail(response))

    def _isolate(self, batch: SpoolBatch, status: int | None, detail: str) -> Outcome:
        """Bisect a refused batch toward its bad item; dead-letter that item once alone."""
        if batch.size() <= 1:
            return self._dead_letter(batch, status, detail)
        halves = self.spool.split(batch.batch_id)
        self.stats.bisections += 1
        log.warning(
            "batch %s (%d items) refused (HTTP %s: %.200s); bisecting into %s to find the bad item",
            batch.batch_id,
            batch.size(),
            status,
            detail,
            halves,
        )
        return Outcome.SPLIT

    def _dead_letter(self, batch: SpoolBatch, status: int | None, detail: str) -> Outcome:
        n = self.spool.quarantine(batch.batch_id, status=status, detail=detail)
        self.stats.quarantined += 1
        self.stats.dead_lettered_items += n
        log.error(
            "batch %s refused (HTTP %s), dead-lettered: %.500s", batch.batch_id, status, detail
        )
        if not _only_agent_notes(batch):  # never a note about a note: no loop
            self._note(n, sorted(k for k, v in batch.items.items() if v), status, detail)
        return Outcome.QUARANTINED

    def _acked(self, batch: SpoolBatch, response: httpx.Response) -> Outcome:
        rejected: dict[tuple[str, int], tuple[int, str]] = {}
        try:
            answer = response.json()
            duplicate = bool(answer.get("duplicate", False))
            if answer.get("batch_id") not in (None, batch.batch_id):
                log.warning("server acked %s for batch %s", answer.get("batch_id"), batch.batch_id)
            for item in answer.get("rejected") or []:
                reason = "; ".join(f"{e['field']}: {e['error']}" for e in item["errors"])
                rejected[(str(item["kind"]), int(item["index"]))] = (int(item["status"]), reason)
        except (ValueError, KeyError, TypeError, AttributeError):
            duplicate = False
        self._auth_logged = False
        n = self.spool.ack(batch.batch_id, rejected=rejected)
        self.stats.batches_delivered += 1
        self.stats.items_delivered += n
        self.stats.duplicates += int(duplicate)
        if rejected:
            self.stats.dead_lettered_items += len(rejected)
            (status, reason), kinds = (
                next(iter(rejected.values())),
                sorted({k for k, _ in rejected}),
            )
            log.error(
                "server rejected %d item(s) of batch %s, dead-lettered: %.500s",
                len(rejected),
                batch.batch_id,
                reason,
            )
            self._note(len(rejected), kinds, status, reason)
        return Outcome.DELIVERED

    def _note(self, n: int, kinds: list[str], status: int | None, detail: str) -> None:
        """Tell the server (an `agent` event) that this node's agent dead-lettered items."""
        total = self.spool.counters().get("dead_lettered_items", 0)
        event = Event(
            ts=self._clock(),
            node=self.node,
            source="agent",
            kind=EventKind.AGENT,
            severity=Severity.WARNING,
            message=clean_text(
                f"agent dead-lettered {n} {'/'.join(kinds)} item(s) after HTTP {status}: {detail}",
                1000,
            ),
            payload={"dead_lettered": n, "dead_lettered_total": total, "status": status},
        )
        self.spool.put(Observations(events=[event]))

    def _server_ready(self) -> bool:
        """True when the server says it can write (so a persistent 5xx is this batch's)."""
        try:
            r = self._client.get(self.ready_url, headers=self._headers)
        except httpx.HTTPError:
            return False
        return r.status_code == 200


def _failing(exc: _Transient) -> bool:
    """A server error that may be this batch's fault (not busy, not unreachable)."""
    return exc.status is not None and exc.status >= 500 and exc.status not in _BUSY_STATUS


def _only_agent_notes(batch: SpoolBatch) -> bool:
    events = batch.items.get("events", [])
    return batch.size() == len(events) and all('"kind":"agent"' in e for e in events)


def _retry_after(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (delta or HTTP date), capped; None when absent."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _detail(response: httpx.Response) -> str:
    """The server's reason, short, for logs and the dead-letter table."""
    try:
        body = response.json()
        detail = body.get("detail", body) if isinstance(body, dict) else body
        return str(detail)[:2000]
    except ValueError:
        return response.text[:2000]
