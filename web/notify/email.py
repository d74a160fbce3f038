"""Email over SMTP: one thread per incident (Message-ID, then In-Reply-To for updates)."""

from __future__ import annotations

import smtplib
from collections.abc import Callable, Sequence
from email.message import EmailMessage

from web.notify.base import DeliveryError, Sink
from web.notify.models import Notice

SmtpFactory = Callable[[], smtplib.SMTP]


def thread_id(n: Notice, domain: str) -> str:
    """The Message-ID of the first message about this subject: later ones reply to it."""
    return f"<{n.subject_key.replace(':', '-')}@{domain}>"


def compose(notices: Sequence[Notice], *, sender: str, recipient: str) -> EmailMessage:
    """The email for notices about one root cause."""
    first = notices[0]
    domain = sender.rpartition("@")[2] or "fleetmedic"
    state = "Resolved" if first.resolved else ("Update" if not first.first else "Incident")
    more = f" (+{len(notices) - 1} more)" if len(notices) > 1 else ""
    msg = EmailMessage()
    msg["Subject"] = f"[fleetmedic] {state}: {first.title}{more}"[:250]
    msg["From"], msg["To"] = sender, recipient
    root = thread_id(first, domain)
    if first.first and not first.resolved:
        msg["Message-ID"] = root
    else:
        msg["In-Reply-To"], msg["References"] = root, root
    parts = []
    for n in notices:
        lines = [n.title, "", n.text]
        if n.evidence and not n.resolved:
            lines += ["", "Evidence:", *[f"  {e}" for e in n.evidence[:5]]]
        if n.action and not n.resolved:
            lines += ["", f"To do: {n.action}"]
        if n.url:
            lines += ["", n.url]
        parts.append("\n".join(lines))
    msg.set_content("\n\n----\n\n".join(parts))
    return msg


class EmailSink(Sink):
    """Sends mail through an SMTP server made by `connect` (the recipient is an address)."""

    kind = "email"

    def __init__(
        self,
        connect: SmtpFactory,
        *,
        sender: str,
        login: tuple[str, str] | None = None,
        starttls: bool = False,
    ) -> None:
        self.connect, self.sender, self.login, self.starttls = connect, sender, login, starttls

    def send(self, notices: Sequence[Notice], *, recipient: str) -> None:
        """Send one email."""
        msg = compose(notices, sender=self.sender, recipient=recipient)
        try:
            with self.connect() as smtp:
                if self.starttls:
                    smtp.starttls()
                if self.login:
                    smtp.login(*self.login)
                smtp.send_message(msg)
        except (OSError, smtplib.SMTPException) as exc:
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc
