"""The one base of every sink: send a group of notices to one recipient, retried with backoff."""

from __future__ import annotations

import abc
import logging
from collections.abc import Sequence

from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from web.notify.models import Notice

log = logging.getLogger(__name__)

MAX_ERROR = 480


class DeliveryError(Exception):
    """A sink could not deliver (network, refused, bad answer); worth a retry."""


class Sink(abc.ABC):
    """An outbound system (Slack, Alertmanager, a webhook, email).

    Its inputs (URL, HTTP client, SMTP factory) are constructor arguments, so tests point it at a
    local receiver. `send` delivers notices about one root cause to one recipient, or raises
    DeliveryError.
    """

    kind: str = "sink"

    @abc.abstractmethod
    def send(self, notices: Sequence[Notice], *, recipient: str) -> None:
        """Deliver the notices as one message."""


def send_with_retries(
    sink: Sink,
    notices: Sequence[Notice],
    *,
    recipient: str,
    attempts: int,
    backoff_s: float,
) -> str | None:
    """Send, retrying DeliveryError with exponential backoff; None on success, else the error."""
    retrying = Retrying(
        stop=stop_after_attempt(max(attempts, 1)),
        wait=wait_exponential(multiplier=backoff_s, max=backoff_s * 8),
        retry=retry_if_exception_type(DeliveryError),
        reraise=False,
    )
    try:
        retrying(sink.send, notices, recipient=recipient)
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        log.warning("%s delivery to %s failed: %s", sink.kind, recipient, cause)
        return f"{type(cause).__name__}: {cause}"[:MAX_ERROR]
    return None
