"""Types the correlator produces: incidents, idle findings, and what one pass did."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class IncidentState(enum.StrEnum):
    """An incident is open until its condition clears; then resolved, never reopened."""

    OPEN = "open"
    RESOLVED = "resolved"


class AffectedJob(BaseModel):
    """A job hit by an incident, with who to tell."""

    model_config = ConfigDict(extra="ignore")

    job_id: str
    scheduler: str | None = None
    user: str | None = None
    account: str | None = None


class Incident(BaseModel):
    """One failure as the correlator understands it: a root cause with its evidence and symptoms."""

    model_config = ConfigDict(extra="ignore")

    id: int | None = None  # None until stored
    fingerprint: str
    occurrence: int = 1
    state: IncidentState = IncidentState.OPEN
    category: str | None = None  # correlator.taxonomy.Category value
    blame: str = "unknown"  # correlator.taxonomy.Blame value
    title: str
    kind: str | None = None
    code: int | None = None
    culprit_node: str | None = None
    culprit_gpu_uuid: str | None = None
    culprit_pci_bus_id: str | None = None
    culprit_gpu_index: int | None = None
    job_id: str | None = None
    affected_jobs: list[AffectedJob] = Field(default_factory=list)
    opened_ts: float
    last_seen_ts: float
    resolved_ts: float | None = None
    resolution: str | None = None
    updated_ts: float = 0.0
    count: int = 1
    confidence: float = 0.5
    action: str | None = None
    explanation: str = ""
    root_cause_event_id: int | None = None
    evidence_event_ids: list[int] = Field(default_factory=list)
    symptom_event_ids: list[int] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

    def job_ids(self) -> set[str]:
        """Ids of the jobs this incident affects."""
        return {j.job_id for j in self.affected_jobs}


class IdleFinding(BaseModel):
    """An allocated GPU that did nothing for a while, and what that cost."""

    model_config = ConfigDict(extra="ignore")

    id: int | None = None
    state: IncidentState = IncidentState.OPEN
    scheduler: str
    job_id: str
    user: str | None = None
    account: str | None = None
    node: str
    gpu_uuid: str
    gpu_index: int | None = None
    pci_bus_id: str | None = None
    idle_since_ts: float
    last_seen_ts: float
    resolved_ts: float | None = None
    resolution: str | None = None
    max_util: float | None = None
    gpu_hours: float = 0.0
    cost: float = 0.0
    updated_ts: float = 0.0


class IdleTotal(BaseModel):
    """Idle GPU-hours and cost summed over one job, user or account."""

    key: str | None  # the job id, user or account (None where the scheduler did not say)
    gpus: int
    gpu_hours: float
    cost: float


class CorrelationReport(BaseModel):
    """What one correlator pass read and wrote."""

    events_read: int = 0
    events_attributed: int = 0  # events tied to at least one job
    events_classified: int = 0  # events a rule understood
    events_failed: int = 0  # events skipped because handling them raised (logged once per kind)
    cursor: int = 0
    incidents_opened: int = 0
    incidents_updated: int = 0
    incidents_resolved: int = 0
    hangs_flagged: int = 0
    idle_opened: int = 0
    idle_resolved: int = 0
    skipped: str | None = None  # why the pass did nothing (e.g. another replica holds the lock)
    duration_s: float = 0.0
    checks_took_s: dict[str, float] = Field(default_factory=dict)  # hang / idle check: seconds
    # received_ts of each event that opened or changed an incident in this pass: latency probes.
    incident_event_received_ts: list[float] = Field(default_factory=list)
    committed_ts: float | None = None
