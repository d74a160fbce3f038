"""SQLAlchemy Core tables of the healer on the timeline's metadata (Alembic 0005 makes them)."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, Float, Index, Integer, String, Table, Text

from timeline.tables import BigId, metadata

actions = Table(
    "healer_actions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    # The same work planned twice (a replayed incident, a restart) is one row.
    Column("key", String(255), nullable=False, unique=True),
    Column("kind", String(32), nullable=False),
    Column("state", String(16), nullable=False),
    Column("mode", String(16), nullable=False),
    Column("scheduler", String(16)),
    Column("cluster", String(64), nullable=False),
    Column("partition", String(128)),
    Column("node", String(255)),
    Column("job_id", String(128)),
    Column("incident_id", BigInteger),
    Column("reason", Text, nullable=False),
    Column("params", JSON, nullable=False),
    Column("result", JSON, nullable=False),
    Column("error", Text),
    Column("not_before_ts", Float),
    Column("created_ts", Float, nullable=False),
    Column("updated_ts", Float, nullable=False),
    Column("started_ts", Float),
    Column("finished_ts", Float),
    Column("approved_by", String(128)),
    Column("attempts", Integer, nullable=False),
    Index("ix_healer_actions_state", "state"),
    Index("ix_healer_actions_incident_id", "incident_id"),
    Index("ix_healer_actions_node", "node"),
    Index("ix_healer_actions_job_id", "job_id"),
    Index("ix_healer_actions_kind_started", "kind", "started_ts"),
)

audit = Table(
    "healer_audit",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("action_id", BigInteger),
    Column("ts", Float, nullable=False),
    Column("actor", String(128), nullable=False),
    Column("what", String(16), nullable=False),
    Column("request", JSON),
    Column("rc", Integer),
    Column("output", Text, nullable=False),
    Column("error", Text, nullable=False),
    Column("duration_s", Float, nullable=False),
    Column("approved_by", String(128)),
    Index("ix_healer_audit_action_id", "action_id"),
)

lineage = Table(
    "healer_lineage",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("scheduler", String(16), nullable=False),
    Column("cluster", String(64), nullable=False),
    Column("old_job_id", String(128), nullable=False),
    Column("new_job_id", String(128), nullable=False),
    Column("how", String(16), nullable=False),
    Column("action_id", BigInteger, unique=True),  # an action runs a job again at most once
    Column("incident_id", BigInteger),
    Column("checkpoint", Text),
    Column("step", BigInteger),
    Column("wandb_run", String(255)),
    Column("ts", Float, nullable=False),
    Index("ix_healer_lineage_old_job_id", "old_job_id"),
    Index("ix_healer_lineage_new_job_id", "new_job_id"),
)

notices = Table(
    "healer_notices",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("key", String(255), nullable=False, unique=True),
    Column("ts", Float, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("recipient", String(128), nullable=False),
    Column("incident_id", BigInteger),
    Column("job_id", String(128)),
    Column("action_id", BigInteger),
    Column("subject", String(255), nullable=False),
    Column("body", Text, nullable=False),
    Column("sent_ts", Float),
    Index("ix_healer_notices_sent_ts", "sent_ts"),
)

state = Table(
    "healer_state",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", JSON, nullable=False),
    Column("updated_ts", Float, nullable=False),
)

__all__ = ["actions", "audit", "lineage", "notices", "state"]
