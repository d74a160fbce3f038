"""SQLAlchemy Core tables of the correlator on the timeline's metadata (Alembic 0002 makes them)."""

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
    Text,
    UniqueConstraint,
    text,
)

from timeline.tables import BigId, metadata

incidents = Table(
    "incidents",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    # sha256 of the incident's identity (category, culprit, code, job); see correlator.incidents.
    Column("fingerprint", String(64), nullable=False),
    Column("occurrence", Integer, nullable=False, default=1),  # 2nd, 3rd... after resolution
    Column("state", String(16), nullable=False),  # open | resolved
    Column("category", String(32)),
    Column("blame", String(16), nullable=False),
    Column("title", String(255), nullable=False),
    Column("kind", String(32)),  # event kind of the root cause
    Column("code", Integer),  # Xid / SXid / exit code of the root cause
    Column("culprit_node", String(255)),
    Column("culprit_gpu_uuid", String(96)),
    Column("culprit_pci_bus_id", String(32)),
    Column("culprit_gpu_index", Integer),
    Column("job_id", String(128)),  # the job whose own fault this is (job-scoped incidents)
    Column("affected_jobs", JSON, nullable=False, default=list),  # [{job_id, user, account}]
    Column("opened_ts", Float, nullable=False),  # event time of the first evidence
    Column("last_seen_ts", Float, nullable=False),  # event time of the newest evidence
    Column("resolved_ts", Float),
    Column("resolution", String(255)),
    Column("updated_ts", Float, nullable=False),  # wall clock of the last write
    Column("count", BigInteger, nullable=False, default=1),  # occurrences summed over events
    Column("confidence", Float, nullable=False),
    Column("action", String(255)),
    Column("explanation", Text, nullable=False, default=""),
    Column("root_cause_event_id", BigInteger),
    Column("evidence_event_ids", JSON, nullable=False, default=list),
    Column("symptom_event_ids", JSON, nullable=False, default=list),
    Column("details", JSON, nullable=False, default=dict),
    UniqueConstraint("fingerprint", "occurrence", name="uq_incidents_fingerprint_occurrence"),
    # At most one open occurrence per fingerprint: concurrent passes cannot both open one.
    Index(
        "uq_incidents_open_fingerprint",
        "fingerprint",
        unique=True,
        sqlite_where=text("state = 'open'"),
        postgresql_where=text("state = 'open'"),
    ),
    Index("ix_incidents_state_last_seen", "state", "last_seen_ts"),
    Index("ix_incidents_culprit_node", "culprit_node"),
    Index("ix_incidents_job_id", "job_id"),
)

idle_findings = Table(
    "idle_findings",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("state", String(16), nullable=False),  # open | resolved
    Column("scheduler", String(16), nullable=False),
    Column("job_id", String(128), nullable=False),
    Column("user", String(128)),
    Column("account", String(128)),  # Slurm account or Kubernetes namespace
    Column("node", String(255), nullable=False),
    Column("gpu_uuid", String(96), nullable=False),
    Column("gpu_index", Integer),
    Column("pci_bus_id", String(32)),
    Column("idle_since_ts", Float, nullable=False),
    Column("last_seen_ts", Float, nullable=False),  # newest idle sample
    Column("resolved_ts", Float),
    Column("resolution", String(255)),
    Column("max_util", Float),
    Column("gpu_hours", Float, nullable=False, default=0.0),
    Column("cost", Float, nullable=False, default=0.0),
    Column("updated_ts", Float, nullable=False),
    Index(
        "uq_idle_findings_open_gpu_job",
        "gpu_uuid",
        "job_id",
        unique=True,
        sqlite_where=text("state = 'open'"),
        postgresql_where=text("state = 'open'"),
    ),
    Index("ix_idle_findings_state", "state"),
)

gpu_power_profiles = Table(
    "gpu_power_profiles",
    metadata,
    # What each GPU has been seen to draw; the hang detector's thresholds are relative to it.
    Column("gpu_uuid", String(96), primary_key=True),
    Column("idle_w", Float),
    Column("max_w", Float),
    Column("limit_w", Float),
    Column("updated_ts", Float, nullable=False),
)

correlator_state = Table(
    "correlator_state",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", JSON, nullable=False),
    Column("updated_ts", Float, nullable=False),
)

__all__ = ["correlator_state", "gpu_power_profiles", "idle_findings", "incidents"]
