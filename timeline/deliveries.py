"""The table of alert deliveries (Alembic 0006 makes it): one row per incident state change,
route and recipient, so each change is sent once; web/notify reads and writes it."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    UniqueConstraint,
)

from timeline.tables import BigId, metadata

notifications = Table(
    "notifications",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("subject_key", String(128), nullable=False),  # "incident:12", "idle:7"
    Column("incident_id", BigInteger),
    Column("route", String(64), nullable=False),  # a configured route, or "owner"
    Column("sink", String(16), nullable=False),  # slack | alertmanager | webhook | email
    Column("recipient", String(255), nullable=False),
    Column("change", String(48), nullable=False),  # opened:<digest> | resolved | nudge
    Column("group_key", String(255)),  # same root cause: sent together
    Column("status", String(16), nullable=False),  # pending | sent | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("failures", Integer, nullable=False, default=0),  # failed attempts, for /metrics
    Column("next_attempt_ts", Float, nullable=False),
    Column("last_error", String(500)),
    Column("created_ts", Float, nullable=False),
    Column("sent_ts", Float),
    Column("last_sent_ts", Float),  # Alertmanager re-sends while the incident is open
    Column("payload", JSON, nullable=False, default=dict),  # the notice as sent
    UniqueConstraint("subject_key", "route", "recipient", "change", name="uq_notifications_change"),
    Index("ix_notifications_status_next", "status", "next_attempt_ts"),
    Index("ix_notifications_incident_id", "incident_id"),
)

__all__ = ["notifications"]
