"""Who gets what: routes by category, severity, partition/namespace and account; job owners.

The routes file (setting `notify_routes_file`) is TOML:

    [[route]]
    name = "oncall"                # shown on the pages and in the deliveries table
    sink = "slack"                 # slack | alertmanager | webhook | email
    to = "https://hooks.slack.com/services/..."   # URL, Alertmanager base URL, or address
    categories = ["gpu_hardware", "interconnect", "node"]   # empty or absent: any
    severities = ["critical"]
    partitions = []                # Slurm partitions or Kubernetes namespaces
    accounts = []

    [owners]                       # job owners get their own job's explanation
    enabled = true
    sink = "email"                 # or "slack" (the user's own webhook)

    [users.alice]
    email = "alice@example.org"
    slack = "https://hooks.slack.com/services/..."
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from timeline.settings import Settings
from web.notify.models import Notice

SINKS = ("slack", "alertmanager", "webhook", "email")
OWNER_ROUTE = "owner"


@dataclass(frozen=True)
class Route:
    """A destination and the notices it wants (an empty filter matches anything)."""

    name: str
    sink: str
    to: str
    categories: frozenset[str] = frozenset()
    severities: frozenset[str] = frozenset()
    partitions: frozenset[str] = frozenset()
    accounts: frozenset[str] = frozenset()

    def matches(self, n: Notice) -> bool:
        """True when every set filter accepts the notice."""
        return (
            (not self.categories or (n.category or "unknown") in self.categories)
            and (not self.severities or n.severity in self.severities)
            and (not self.partitions or bool(self.partitions & set(n.partitions)))
            and (not self.accounts or bool(self.accounts & set(n.accounts)))
        )

    def describe(self) -> str:
        """The filters in a few words, for the pages."""
        parts = [
            f"{label} {', '.join(sorted(values))}"
            for label, values in (
                ("category", self.categories),
                ("severity", self.severities),
                ("partition", self.partitions),
                ("account", self.accounts),
            )
            if values
        ]
        return "; ".join(parts) or "everything"


@dataclass(frozen=True)
class Contact:
    """How to reach one user."""

    email: str | None = None
    slack: str | None = None


@dataclass
class NotifyConfig:
    """Routes, user contacts and the owner policy."""

    routes: list[Route] = field(default_factory=list)
    users: dict[str, Contact] = field(default_factory=dict)
    owners: bool = False
    owner_sink: str = "email"
    mail_domain: str | None = None

    def owner_target(self, user: str | None) -> tuple[str, str] | None:
        """(sink, recipient) for a job owner, or None when there is no way to reach them."""
        if not user or not self.owners:
            return None
        contact = self.users.get(user, Contact())
        if self.owner_sink == "slack":
            return ("slack", contact.slack) if contact.slack else None
        if contact.email:
            return ("email", contact.email)
        if self.mail_domain and "@" not in user and "/" not in user:
            return ("email", f"{user}@{self.mail_domain}")  # like Slurm's MailDomain
        return None


def _set(raw: dict[str, Any], key: str) -> frozenset[str]:
    values = raw.get(key) or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"route {raw.get('name')!r}: {key} must be a list of strings")
    return frozenset(values)


def parse_config(data: dict[str, Any], *, settings: Settings) -> NotifyConfig:
    """Check and build the config; a bad route is a ValueError at start-up (fail loudly)."""
    routes = []
    for i, raw in enumerate(data.get("route", [])):
        name, sink, to = raw.get("name") or f"route-{i + 1}", raw.get("sink"), raw.get("to")
        if sink not in SINKS:
            raise ValueError(f"route {name!r}: sink must be one of {', '.join(SINKS)}")
        if not isinstance(to, str) or not to:
            raise ValueError(f"route {name!r}: `to` (URL or address) is required")
        if name == OWNER_ROUTE:
            raise ValueError(f"route name {OWNER_ROUTE!r} is reserved for job owners")
        routes.append(
            Route(
                str(name)[:64],
                sink,
                to,
                _set(raw, "categories"),
                _set(raw, "severities"),
                _set(raw, "partitions"),
                _set(raw, "accounts"),
            )
        )
    users = {
        str(u): Contact(email=c.get("email"), slack=c.get("slack"))
        for u, c in (data.get("users") or {}).items()
        if isinstance(c, dict)
    }
    owners = data.get("owners") or {}
    owner_sink = str(owners.get("sink", settings.notify_owner_sink))
    if owner_sink not in ("email", "slack"):
        raise ValueError("owners.sink must be email or slack")
    return NotifyConfig(
        routes,
        users,
        bool(owners.get("enabled", bool(owners))),
        owner_sink,
        settings.notify_mail_domain,
    )


def load_config(settings: Settings) -> NotifyConfig:
    """The routes file named by the settings (no file: no routes, owners off)."""
    path: Path | None = settings.notify_routes_file
    if path is None:
        return NotifyConfig(mail_domain=settings.notify_mail_domain)
    with open(path, "rb") as fh:
        return parse_config(tomllib.load(fh), settings=settings)
