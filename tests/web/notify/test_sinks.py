"""Each sink against a local receiver: Slack Block Kit within its limits, the JSON webhook,
email through aiosmtpd, retries with backoff, and routing by category/severity/partition."""

from __future__ import annotations

import time

import httpx
import pytest

from timeline.settings import Settings
from web.notify.base import send_with_retries
from web.notify.email import EmailSink
from web.notify.fakes import HttpReceiver, SmtpReceiver
from web.notify.models import Notice
from web.notify.routing import parse_config
from web.notify.slack import MAX_BLOCKS, MAX_SECTION, SlackSink
from web.notify.webhook import WebhookSink


def notice(i: int = 1, **kw: object) -> Notice:
    base = dict(
        subject_key=f"incident:{i}",
        incident_id=i,
        change="opened:abc",
        title="Xid 79",
        text="GPU fell off the bus <@here> & <https://evil|click>",
        severity="critical",
        category="gpu_hardware",
        blame="node",
        node="gpu-node-01",
        jobs=["42"],
        evidence=["NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."],
        action="drain the node",
        url=f"http://fm/incidents/{i}",
        opened_ts=time.time(),
        partitions=["gpu"],
        accounts=["vision"],
        group_key="gpu_hardware|xid|79",
    )
    base.update(kw)
    return Notice.model_validate(base)


def test_slack_gets_block_kit_within_its_limits_with_user_text_escaped() -> None:
    with HttpReceiver() as rx, httpx.Client() as client:
        many = [notice(0)] + [notice(i, text="x" * 5000) for i in range(1, 40)]
        SlackSink(client).send(many, recipient=f"{rx.url}/hooks/T1")
        body = rx.received[0].body
    assert rx.received[0].path == "/hooks/T1"
    assert len(body["blocks"]) <= MAX_BLOCKS
    sections = [b["text"]["text"] for b in body["blocks"] if b["type"] == "section"]
    assert all(len(t) <= MAX_SECTION for t in sections)
    assert "more incidents with the same root cause" in sections[-1]
    assert "<@here>" not in str(body) and "&lt;@here&gt;" in str(body)


def test_webhook_posts_the_notices_as_json() -> None:
    with HttpReceiver() as rx, httpx.Client() as client:
        WebhookSink(client).send([notice(7)], recipient=rx.url + "/fm")
    got = rx.received[0].body
    assert got["version"] == 1 and got["notices"][0]["incident_id"] == 7


def test_email_goes_through_a_real_smtp_server_threaded_per_incident() -> None:
    with SmtpReceiver() as smtp:
        import smtplib

        sink = EmailSink(
            lambda: smtplib.SMTP("127.0.0.1", smtp.port, timeout=5), sender="fleetmedic@example.org"
        )
        sink.send([notice(3)], recipient="alice@example.org")
        sink.send([notice(3, change="resolved", first=False)], recipient="alice@example.org")
        deadline = time.monotonic() + 5
        while len(smtp.messages) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    first, resolved = smtp.messages
    assert first["To"] == "alice@example.org" and "Incident: Xid 79" in first["Subject"]
    assert first["Message-ID"] == "<incident-3@example.org>"
    assert resolved["In-Reply-To"] == first["Message-ID"] and "Resolved" in resolved["Subject"]


def test_retries_with_backoff_then_succeed_or_report_the_error() -> None:
    with HttpReceiver() as rx, httpx.Client() as client:
        rx.fail_next(2)
        ok = send_with_retries(
            WebhookSink(client), [notice()], recipient=rx.url, attempts=3, backoff_s=0.01
        )
        assert ok is None and len(rx.received) == 1
        rx.fail_next(5)
        error = send_with_retries(
            WebhookSink(client), [notice()], recipient=rx.url, attempts=2, backoff_s=0.01
        )
    assert error is not None and "HTTP 503" in error


def test_routes_match_by_category_severity_partition_and_account() -> None:
    config = parse_config(
        {
            "route": [
                {"name": "hw", "sink": "slack", "to": "http://x", "categories": ["gpu_hardware"]},
                {"name": "crit", "sink": "webhook", "to": "http://y", "severities": ["critical"]},
                {"name": "ml", "sink": "email", "to": "ml@x", "partitions": ["ml"]},
                {"name": "acct", "sink": "email", "to": "v@x", "accounts": ["vision"]},
            ],
            "owners": {"enabled": True},
            "users": {"alice": {"email": "alice@x"}},
        },
        settings=Settings(notify_mail_domain="corp.example"),
    )
    n = notice()
    assert [r.name for r in config.routes if r.matches(n)] == ["hw", "crit", "acct"]
    user_bug = notice(category="user_code", severity="warning", accounts=["rl"])
    assert [r.name for r in config.routes if r.matches(user_bug)] == []
    assert config.owner_target("alice") == ("email", "alice@x")
    assert config.owner_target("bob") == ("email", "bob@corp.example")  # like Slurm's MailDomain
    with pytest.raises(ValueError, match="sink must be one of"):
        parse_config({"route": [{"sink": "pager", "to": "x"}]}, settings=Settings())
