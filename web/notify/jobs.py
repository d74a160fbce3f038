"""The notifier as a periodic job of the server: sinks built from settings, one Notifier."""

from __future__ import annotations

import logging
import smtplib
from collections.abc import Callable

import httpx
from sqlalchemy.orm import Session, sessionmaker

from timeline.settings import Settings
from web.notify.alertmanager import AlertmanagerSink
from web.notify.base import Sink
from web.notify.email import EmailSink
from web.notify.flows import Notifier, NotifyReport
from web.notify.routing import load_config
from web.notify.slack import SlackSink
from web.notify.webhook import WebhookSink

log = logging.getLogger(__name__)


def build_sinks(settings: Settings, client: httpx.Client) -> dict[str, Sink]:
    """One sink per kind, sharing one HTTP client; email through the configured SMTP server."""
    host, port, timeout = (
        settings.notify_smtp_host,
        settings.notify_smtp_port,
        settings.notify_timeout_s,
    )
    login = None
    if settings.notify_smtp_user and settings.notify_smtp_password:
        login = (settings.notify_smtp_user, settings.notify_smtp_password.get_secret_value())
    return {
        "slack": SlackSink(client),
        "webhook": WebhookSink(client),
        "alertmanager": AlertmanagerSink(client),
        "email": EmailSink(
            lambda: smtplib.SMTP(host, port, timeout=timeout),
            sender=settings.notify_smtp_from,
            login=login,
            starttls=settings.notify_smtp_starttls,
        ),
    }


def build_notifier(factory: sessionmaker[Session], settings: Settings) -> Notifier:
    """The server's notifier; a bad routes file is an error at start-up."""
    client = httpx.Client(timeout=settings.notify_timeout_s, follow_redirects=False)
    return Notifier(factory, settings, load_config(settings), build_sinks(settings, client))


def run_notifier(
    notifier: Notifier, *, fence: Callable[[Session], None] | None = None
) -> NotifyReport:
    """One periodic pass; `fence` (leadership, issue #13) guards every recording transaction."""
    report = notifier.run_once(fence=fence)
    if report.planned or report.sent or report.failed:
        log.info("notifier: %s", report)
    return report
