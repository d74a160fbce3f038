"""Slack incoming webhook with Block Kit: explanation, evidence, actions and links.

Block Kit limits: at most 50 blocks per message, 3,000 characters in a section's text, 150 in
a header; longer text is cut with an ellipsis, extra notices are summed up in one last block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from web.notify.base import Sink
from web.notify.http import post_json
from web.notify.models import Notice

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
_ICON = {
    "critical": ":red_circle:",
    "warning": ":large_orange_circle:",
    "info": ":information_source:",
}


def cut(text: str, limit: int) -> str:
    """Text within `limit` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escape(text: str) -> str:
    # Slack mrkdwn: &, < and > must be escaped, or a user's text could forge links and mentions.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def notice_blocks(n: Notice) -> list[dict[str, Any]]:
    """The blocks of one notice: summary, evidence, action and a link."""
    state = "Resolved" if n.resolved else ("Update" if not n.first else "New")
    icon = ":white_check_mark:" if n.resolved else _ICON.get(n.severity, "")
    head = f"{icon} *{state}: {_escape(n.title)}*\n{_escape(n.text)}"
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": cut(head, MAX_SECTION)}}
    ]
    if n.evidence and not n.resolved:
        quoted = "\n".join(f"> {_escape(line)}" for line in n.evidence[:5])
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": cut(quoted, MAX_SECTION)}}
        )
    facts = [
        f"*{k}:* {_escape(str(v))}"
        for k, v in (
            ("category", n.category),
            ("node", n.node),
            ("GPU", n.gpu),
            ("jobs", ", ".join(n.jobs[:10])),
            ("to do", n.action),
        )
        if v
    ]
    if n.url:
        facts.append(f"<{n.url}|open in fleetmedic>")
    if facts:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": cut(" · ".join(facts), MAX_SECTION)}],
            }
        )
    return blocks


def message(notices: Sequence[Notice]) -> dict[str, Any]:
    """One Slack message for notices of one root cause (within Block Kit's limits)."""
    first = notices[0]
    title = first.title if len(notices) == 1 else f"{first.title} ({len(notices)} incidents)"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": cut(title, MAX_HEADER)}}
    ]
    shown = 0
    for n in notices:
        more = notice_blocks(n)
        if len(blocks) + len(more) + 2 > MAX_BLOCKS:
            break
        blocks += [*more, {"type": "divider"}]
        shown += 1
    if shown < len(notices):
        rest = f"…and {len(notices) - shown} more incidents with the same root cause."
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": rest}})
    return {"text": cut(title, MAX_SECTION), "blocks": blocks[:MAX_BLOCKS]}


class SlackSink(Sink):
    """Posts to a Slack incoming-webhook URL (the recipient is the URL)."""

    kind = "slack"

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def send(self, notices: Sequence[Notice], *, recipient: str) -> None:
        """Post one Block Kit message."""
        post_json(self.client, recipient, message(notices))
