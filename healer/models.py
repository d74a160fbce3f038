"""Types of the healer: actions and their states, audits, lineage, notices, step outcomes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Every drain, cordon and annotation we make starts with this, so we undo only what we did.
REASON_PREFIX = "fleetmedic:"


class ActionKind(enum.StrEnum):
    """What an action does."""

    DRAIN = "drain"  # Slurm drain / Kubernetes cordon + taint
    RESET_GPU = "reset_gpu"  # a configured command resets the GPU on its node
    RECOVER = "recover"  # requeue or resubmit a Slurm job, recreate a Kubernetes Job
    NOTIFY = "notify"  # tell the job's owner and the on-call what happened and what was done
    RETURN = "return"  # validate a node we took out and put it back in service


class ActionState(enum.StrEnum):
    """planned -> approved -> running -> done | failed | cancelled."""

    PLANNED = "planned"
    APPROVED = "approved"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({ActionState.DONE, ActionState.FAILED, ActionState.CANCELLED})


class ActionMode(enum.StrEnum):
    """How an action may proceed, decided by the policy when it is planned."""

    ACT = "act"  # runs without a person
    APPROVAL = "approval"  # waits for an admin's approve or reject
    PROPOSED = "proposed"  # confidence below the threshold: only proposed (an admin may approve)
    OBSERVE = "observe"  # acting is off for this cluster/partition/kind: shown, never run


class Action(BaseModel):
    """One thing the healer does (or would do), persisted with its state and idempotency key."""

    model_config = ConfigDict(extra="ignore")

    id: int | None = None
    key: str  # idempotency key: the same work planned twice is one row
    kind: ActionKind
    state: ActionState = ActionState.PLANNED
    mode: ActionMode = ActionMode.OBSERVE
    scheduler: str | None = None  # slurm | kubernetes (None: notices)
    cluster: str = "default"
    partition: str | None = None  # Slurm partition or Kubernetes namespace
    node: str | None = None
    job_id: str | None = None
    incident_id: int | None = None
    reason: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    not_before_ts: float | None = None
    created_ts: float = 0.0
    updated_ts: float = 0.0
    started_ts: float | None = None
    finished_ts: float | None = None
    approved_by: str | None = None
    attempts: int = 0

    @property
    def terminal(self) -> bool:
        """True when the action will never change again."""
        return self.state in TERMINAL


class AuditEntry(BaseModel):
    """One command or API call an action made, or one state change, with who approved it."""

    model_config = ConfigDict(extra="ignore")

    id: int | None = None
    action_id: int | None = None
    ts: float
    actor: str = "healer"  # who did it: the healer, or an admin by name
    what: str  # command | api | state | note
    request: Any = None  # argv, or {method, path, body}
    rc: int | None = None  # exit code or HTTP status
    output: str = ""
    error: str = ""
    duration_s: float = 0.0
    approved_by: str | None = None


class Lineage(BaseModel):
    """A job run again by us: the old job, the new one (the same id for a Slurm requeue)."""

    model_config = ConfigDict(extra="ignore")

    id: int | None = None
    scheduler: str
    cluster: str = "default"
    old_job_id: str
    new_job_id: str
    how: str  # requeue | resubmit | recreate
    action_id: int | None = None
    incident_id: int | None = None
    checkpoint: str | None = None
    step: int | None = None
    wandb_run: str | None = None
    ts: float


class Notice(BaseModel):
    """A message for a person (a job's owner or the on-call), kept until the notifier sends it."""

    model_config = ConfigDict(extra="ignore")

    id: int | None = None
    key: str  # one notice per (incident or trip, recipient)
    ts: float
    kind: str  # owner | oncall
    recipient: str  # the job's user, or "oncall"
    incident_id: int | None = None
    job_id: str | None = None
    action_id: int | None = None
    subject: str
    body: str
    sent_ts: float | None = None


class BreakerState(BaseModel):
    """The blast-radius breaker: tripped or not, why, and its reset epoch."""

    tripped: bool = False
    tripped_ts: float | None = None
    reason: str | None = None
    scope: str | None = None  # cluster or cluster/partition that hit its cap
    count: int = 0  # drains in the window when it tripped
    cap: int = 0
    epoch: int = 0  # bumped by each reset; drains planned before it are never replayed
    reset_ts: float | None = None
    reset_by: str | None = None


class HeldNode(BaseModel):
    """A node we took out of service and still hold, with why it stays out."""

    scheduler: str
    cluster: str
    node: str
    drain_action_id: int
    incident_id: int | None
    since_ts: float | None
    reason: str
    support: str | None = None  # why a person must look (contact support, flapping), if so


class ActionCount(BaseModel):
    """Actions of one kind that ended one way: fleetmedic_healer_actions_total{action,result}."""

    action: str
    result: str
    count: int


class HealReport(BaseModel):
    """What one healer pass did."""

    skipped: str | None = None
    incidents_read: int = 0
    planned: int = 0
    steps: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    waiting: int = 0
    released: int = 0  # nodes a person resumed (our workflow cancelled)
    duration_s: float = 0.0


@dataclass
class StepOutcome:
    """What one step of an action came to: done, failed, or wait and come back later."""

    status: str  # done | failed | wait
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    retry_at: float | None = None  # for wait: when to look again
    notices: list[Notice] = field(default_factory=list)  # messages to queue with the outcome
    follow_up: list[Action] = field(default_factory=list)  # actions to plan with the outcome

    @classmethod
    def done(cls, **result: Any) -> StepOutcome:
        """The action reached its goal (or found it already reached)."""
        return cls("done", dict(result))

    @classmethod
    def failed(cls, error: str, **result: Any) -> StepOutcome:
        """The action cannot reach its goal."""
        return cls("failed", dict(result), error=error)

    @classmethod
    def wait(cls, retry_at: float, **result: Any) -> StepOutcome:
        """Not yet: the next pass continues from the persisted params."""
        return cls("wait", dict(result), retry_at=retry_at)


@dataclass
class NodeStatus:
    """A node as its scheduler reports it now, and whether its drain/cordon is ours."""

    name: str
    exists: bool = True
    out: bool = False  # drained / draining / cordoned
    reason: str | None = None
    ours: bool = False
    state: str | None = None
    partitions: list[str] = field(default_factory=list)
    healthy: bool = True  # the scheduler sees it responding (not DOWN, FAIL, NOT_RESPONDING)
