"""The failure taxonomy (design.md): categories, blame, and the verdict a rule gives."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Category(enum.StrEnum):
    """What kind of failure it was."""

    GPU_HARDWARE = "gpu_hardware"
    INTERCONNECT = "interconnect"
    NODE = "node"
    USER_CODE = "user_code"
    OOM_HOST = "oom_host"
    OOM_GPU = "oom_gpu"
    SCHEDULER = "scheduler"
    NCCL_TIMEOUT_UNKNOWN = "nccl_timeout_unknown"


class Blame(enum.StrEnum):
    """Who should act: cordon the node, fix the job, look at fabric/scheduler, or unknown."""

    NODE = "node"
    JOB = "job"
    INFRA = "infra"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Verdict:
    """What one piece of evidence means on its own."""

    category: Category | None  # None: known to be noise or a consequence, or not understood
    blame: Blame
    action: str  # recommended action, e.g. "drain node and resubmit job"
    confidence: float  # 0..1: how sure this evidence alone makes us
    summary: str  # short meaning, e.g. "GPU has fallen off the bus"
    root_cause: bool = True  # False for consequences (Xid 45, NCCL timeouts, ChildFailedError)
    # Higher wins when several root causes compete for one failure (hardware > user code).
    priority: int = 0
    # The host the evidence itself names as at fault (the remote peer of a socket error), and
    # whether the host that logged the line is a suspect at all (not for timeouts/peer errors).
    culprit: str | None = None
    at_printer: bool = True
    # A peer the line names while the host that logged it stays the suspect (an InfiniBand
    # completion error): several hosts naming the same one peer point at that peer instead.
    peer_named: str | None = None
    # A check's failure that names no cause (NHC's "Check X returned N"): a recognised fault the
    # text shows beside it is its cause (rules/checks.py, explain/reasoning.py).
    cause_unstated: bool = False
    # The signal that ended the process, when the verdict is the signal reasoner's (signals.py):
    # a SIGKILL beside a rank that crashed is the launcher's teardown (signals.after_crash).
    signal: int | None = None
