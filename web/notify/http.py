"""POSTing JSON for the HTTP sinks: a non-2xx answer or a network error is a DeliveryError."""

from __future__ import annotations

from typing import Any

import httpx

from web.notify.base import DeliveryError


def post_json(client: httpx.Client, url: str, body: Any) -> httpx.Response:
    """POST `body` as JSON; raise DeliveryError unless the answer is 2xx."""
    try:
        r = client.post(url, json=body)
    except httpx.HTTPError as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc
    if r.status_code >= 300:
        raise DeliveryError(f"HTTP {r.status_code}: {r.text[:200]}")
    return r
