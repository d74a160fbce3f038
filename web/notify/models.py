"""What an alert says (Notice), and a delivery as the table records it."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from correlator.models import Incident, IncidentState
from correlator.taxonomy import Blame


class Notice(BaseModel):
    """One thing to tell: an incident opened, changed or resolved, or an idle GPU nudge."""

    subject_key: str  # "incident:12" or "idle:7"
    incident_id: int | None = None
    change: str  # opened:<digest> | resolved | nudge
    first: bool = True  # False: an update of something already told
    title: str
    text: str
    severity: str = "warning"  # critical | warning | info
    category: str | None = None
    blame: str | None = None
    node: str | None = None
    gpu: str | None = None
    jobs: list[str] = Field(default_factory=list)
    users: list[str] = Field(default_factory=list)
    accounts: list[str] = Field(default_factory=list)
    partitions: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    action: str | None = None
    url: str | None = None
    opened_ts: float
    resolved_ts: float | None = None
    group_key: str = ""

    @property
    def resolved(self) -> bool:
        """True for a resolved message."""
        return self.change == "resolved"


class Delivery(BaseModel):
    """One row of the notifications table."""

    model_config = ConfigDict(extra="ignore")

    id: int
    subject_key: str
    incident_id: int | None = None
    route: str
    sink: str
    recipient: str
    change: str
    group_key: str | None = None
    status: str
    attempts: int = 0
    failures: int = 0
    next_attempt_ts: float
    last_error: str | None = None
    created_ts: float
    sent_ts: float | None = None
    last_sent_ts: float | None = None
    payload: dict[str, Any] = Field(default_factory=dict)

    def notice(self) -> Notice:
        """The notice this row was planned for."""
        return Notice.model_validate(self.payload)


def severity(inc: Incident) -> str:
    """critical when the machine or fabric is at fault, else warning."""
    return "critical" if inc.blame in (Blame.NODE.value, Blame.INFRA.value) else "warning"


def change_of(inc: Incident) -> str:
    """The state an incident is in, as far as alerts care: meaning changes are updates."""
    if inc.state is IncidentState.RESOLVED:
        return "resolved"
    meaning = "\x1f".join(
        str(x) for x in (inc.category, inc.blame, inc.title, inc.culprit_node, inc.culprit_gpu_uuid)
    )
    return "opened:" + hashlib.sha256(meaning.encode()).hexdigest()[:12]
