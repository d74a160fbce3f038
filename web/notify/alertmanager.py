"""Alertmanager v2: POST /api/v2/alerts; labels identify the incident, annotations explain it.

Alertmanager resolves an alert that is not re-sent within its resolve_timeout, so open incidents
are re-sent on a timer (the caller's job); a resolved incident is sent once with endsAt.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import httpx

from web.notify.base import Sink
from web.notify.http import post_json
from web.notify.models import Notice

ALERTNAME = "FleetmedicIncident"


def _rfc3339(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).isoformat().replace("+00:00", "Z")


def alert(n: Notice) -> dict[str, Any]:
    """One Alertmanager alert for a notice."""
    labels = {
        "alertname": ALERTNAME if n.incident_id is not None else "FleetmedicIdleGpus",
        "fleetmedic_id": n.subject_key,
        "severity": n.severity,
        "category": n.category or "unknown",
        "blame": n.blame or "unknown",
    }
    if n.node:
        labels["node"] = n.node
    if n.gpu:
        labels["gpu"] = n.gpu
    body: dict[str, Any] = {
        "labels": labels,
        "annotations": {
            "summary": n.title[:500],
            "description": n.text[:4000],
            "action": (n.action or "")[:500],
            "evidence": "\n".join(n.evidence[:5])[:2000],
            "jobs": ", ".join(n.jobs[:20]),
        },
        "startsAt": _rfc3339(n.opened_ts),
    }
    if n.url:
        body["generatorURL"] = n.url
    if n.resolved:
        body["endsAt"] = _rfc3339(n.resolved_ts or n.opened_ts)
    return body


class AlertmanagerSink(Sink):
    """Posts alerts to an Alertmanager (the recipient is its base URL)."""

    kind = "alertmanager"

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def send(self, notices: Sequence[Notice], *, recipient: str) -> None:
        """Post every notice as one alert in one request."""
        post_json(
            self.client, recipient.rstrip("/") + "/api/v2/alerts", [alert(n) for n in notices]
        )
