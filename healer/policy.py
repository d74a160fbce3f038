"""The healing policy: which incidents lead to which actions, where acting is on, the limits.

A policy file (TOML or YAML, `healer_policy_file`) overrides these defaults key by key. With no
file, or a file without `[[act]]` scopes, the healer only observes: it plans and shows every
action and runs none.
"""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from correlator.models import Incident
from healer.models import ActionKind, ActionMode


class Rule(BaseModel):
    """Incidents this rule matches (category, blame, codes) and the actions they get."""

    model_config = ConfigDict(extra="forbid")

    name: str
    category: list[str] | None = None  # None: any category
    blame: list[str] | None = None  # None: any blame
    codes: list[int] | None = None  # Xid / exit codes; None: any
    actions: list[ActionKind] = Field(default_factory=list)
    min_confidence: float | None = None  # None: the policy's min_confidence
    # Drain only once the same node had this many incidents of this rule within window_s.
    occurrences: int = 1
    window_s: float = 86400.0
    max_recoveries: int | None = None  # per job and incident rule (None: the requeue budget)
    # Where NVIDIA's Xid catalog says a GPU reset suffices, reset the GPU instead of draining.
    gpu_reset: bool = False
    # For faults the scheduler itself reports (a node not responding): wait this long, then
    # drain only if the scheduler still shows the node unhealthy (Slurm's `idle*` flickers).
    confirm_s: float = 0.0

    @field_validator("category", "blame", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def matches(self, incident: Incident) -> bool:
        """True when the incident's category, blame and code are all ones this rule names."""
        if self.category is not None and incident.category not in self.category:
            return False
        if self.blame is not None and incident.blame not in self.blame:
            return False
        return self.codes is None or incident.code in self.codes


class Scope(BaseModel):
    """Where acting is switched on: cluster and partition/namespace globs, action kinds."""

    model_config = ConfigDict(extra="forbid")

    cluster: str = "*"
    partition: str = "*"  # Slurm partition or Kubernetes namespace
    kinds: list[str] = Field(default_factory=lambda: ["*"])
    approval: bool = False  # actions here wait for an admin's approve

    def covers(self, *, kind: str, cluster: str, partition: str | None) -> bool:
        """True when this scope switches acting on for this kind, cluster and partition."""
        part_ok = fnmatch.fnmatchcase(partition or "", self.partition) or self.partition == "*"
        kind_ok = any(fnmatch.fnmatchcase(kind, k) for k in self.kinds)
        return fnmatch.fnmatchcase(cluster, self.cluster) and part_ok and kind_ok


DEFAULT_RULES: list[Rule] = [
    Rule(
        name="gpu-hardware",
        category=["gpu_hardware"],
        blame=["node"],
        actions=[ActionKind.DRAIN, ActionKind.RECOVER, ActionKind.NOTIFY],
    ),
    Rule(
        name="node",
        category=["node"],
        blame=["node"],
        actions=[ActionKind.DRAIN, ActionKind.RECOVER, ActionKind.NOTIFY],
        confirm_s=30.0,
    ),
    Rule(
        name="interconnect",
        category=["interconnect"],
        actions=[ActionKind.DRAIN, ActionKind.NOTIFY],
        occurrences=3,
        window_s=86400.0,
    ),
    Rule(
        name="user-fault",
        category=["user_code", "oom_gpu", "oom_host"],
        actions=[ActionKind.NOTIFY],
    ),
    Rule(
        name="nccl-unknown",
        category=["nccl_timeout_unknown"],
        actions=[ActionKind.RECOVER, ActionKind.NOTIFY],
        min_confidence=0.45,  # the correlator is honest that these are uncertain
        max_recoveries=1,
    ),
    Rule(name="scheduler", category=["scheduler"], actions=[]),
]


class Policy(BaseModel):
    """Every decision knob of the healer; see README "Healer" for each one."""

    model_config = ConfigDict(extra="forbid")

    min_confidence: float = 0.8  # below it an action is only proposed
    act: list[Scope] = Field(default_factory=list)  # empty: observe only
    rules: list[Rule] = Field(default_factory=lambda: [r.model_copy() for r in DEFAULT_RULES])
    # Blast radius: at most this many nodes, or this share of a cluster/partition, per window.
    breaker_max_nodes: int = 5
    breaker_max_fraction: float = 0.10
    breaker_window_s: float = 3600.0
    # Per job: recoveries allowed within the window; each one after the first waits longer.
    requeue_budget: int = 3
    requeue_window_s: float = 86400.0
    requeue_backoff_s: float = 60.0
    # Per node: this many heals in the window, or fatal Xids on one GPU, means "contact support".
    node_heal_limit: int = 3
    node_heal_window_s: float = 7 * 86400.0
    gpu_fatal_limit: int = 3
    gpu_fatal_window_s: float = 86400.0
    flap_window_s: float = 86400.0  # drained -> returned -> drained within this: flapping
    # Return to service: the fault's evidence quiet this long, then the validation must pass.
    return_after_quiet_s: float = 600.0
    validation_command: list[str] = Field(default_factory=list)  # {node}; empty: never return
    validation_timeout_s: float = 600.0
    gpu_reset_command: list[str] = Field(default_factory=list)  # {node}, {gpu}, {pci}
    # Checkpoint directory by account/namespace glob: {user}, {account}, {job_id}, {job_name}.
    checkpoint_patterns: dict[str, str] = Field(default_factory=dict)
    checkpoint_globs: list[str] = Field(default_factory=list)  # extra layouts: newest match wins
    kubernetes_recreate: list[str] = Field(default_factory=lambda: ["Job"])  # + "PyTorchJob"
    notify_wait_s: float = 120.0  # tell people when the incident's actions ended, or this late
    oncall: str = "oncall"  # the recipient name of on-call notices

    def rule_for(self, incident: Incident) -> Rule | None:
        """The first rule that matches the incident, or None (nothing to do)."""
        return next((r for r in self.rules if r.matches(incident)), None)

    def mode_for(
        self,
        *,
        kind: ActionKind,
        cluster: str,
        partition: str | None,
        confidence: float,
        rule: Rule | None,
    ) -> ActionMode:
        """How an action may proceed: act, wait for approval, only proposed, or observe."""
        scope = next(
            (
                s
                for s in self.act
                if s.covers(kind=kind.value, cluster=cluster, partition=partition)
            ),
            None,
        )
        if scope is None:
            return ActionMode.OBSERVE
        threshold = self.min_confidence
        if rule is not None and rule.min_confidence is not None:
            threshold = rule.min_confidence
        if kind in (ActionKind.DRAIN, ActionKind.RECOVER, ActionKind.RESET_GPU) and (
            confidence < threshold
        ):
            return ActionMode.PROPOSED
        return ActionMode.APPROVAL if scope.approval else ActionMode.ACT

    def breaker_cap(self, size: int) -> int:
        """How many drains the window allows in a cluster/partition of `size` nodes (>= 1)."""
        share = int(self.breaker_max_fraction * size) if size > 0 else self.breaker_max_nodes
        return max(1, min(self.breaker_max_nodes, share))

    def digest(self) -> str:
        """A short stable text of the policy, for logs and the backtest report."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


class PolicyError(ValueError):
    """The policy file cannot be read or says something the healer cannot follow."""


def load_policy(path: Path | str | None) -> Policy:
    """The defaults, overridden by a TOML or YAML file when a path is given."""
    if path is None:
        return Policy()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        if p.suffix.lower() in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        else:
            data = tomllib.loads(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise PolicyError(f"cannot read policy {p}: {exc}") from exc
    if not isinstance(data, dict):
        raise PolicyError(f"policy {p} must be a table/mapping at the top")
    try:
        return Policy.model_validate(data)
    except ValueError as exc:
        raise PolicyError(f"policy {p} is invalid: {exc}") from exc


class PolicyFile:
    """A policy file re-read when it changes, so an operator can switch acting on without a
    restart; a broken edit keeps the last good policy (and says why)."""

    def __init__(self, path: Path | str | None) -> None:
        self.path = Path(path) if path else None
        self._mtime: float | None = None
        self.policy = load_policy(self.path)
        self.error: str | None = None
        if self.path is not None:
            self._mtime = self.path.stat().st_mtime

    def current(self) -> Policy:
        """The policy now (reloaded when the file's mtime changed)."""
        if self.path is None:
            return self.policy
        try:
            mtime = self.path.stat().st_mtime
            if mtime != self._mtime:
                self._mtime = mtime
                self.policy, self.error = load_policy(self.path), None
        except (OSError, PolicyError) as exc:
            self.error = str(exc)
        return self.policy
