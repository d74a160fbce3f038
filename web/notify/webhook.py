"""A generic JSON webhook: the notices as they are, one POST per root-cause group."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from web.notify.base import Sink
from web.notify.http import post_json
from web.notify.models import Notice


class WebhookSink(Sink):
    """POSTs {"version": 1, "group": ..., "notices": [...]} to the recipient URL."""

    kind = "webhook"

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def send(self, notices: Sequence[Notice], *, recipient: str) -> None:
        """Post the group."""
        body = {
            "version": 1,
            "group": notices[0].group_key,
            "notices": [n.model_dump(mode="json") for n in notices],
        }
        post_json(self.client, recipient, body)
