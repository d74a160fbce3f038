"""One step of one action: what each kind does, with its scheduler's actor.

Steps make calls and read the store; they write nothing themselves. flows.py persists their
outcome (and the notices and follow-up actions they return) in one fenced transaction.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from collector.slurm.runner import CommandRunner
from correlator import service as incidents
from correlator.models import Incident
from healer import service
from healer.audit import Audit
from healer.checkpoints import find_checkpoint
from healer.models import (
    Action,
    ActionKind,
    ActionMode,
    ActionState,
    NodeStatus,
    StepOutcome,
)
from healer.notify import incident_notices, oncall_alert
from healer.planner import node_info
from healer.policy import Policy
from timeline import queries

Save = Callable[[dict[str, Any]], None]


class Actor(Protocol):
    """What the healer needs from a scheduler (healer.slurm.SlurmActor, healer.kubernetes)."""

    scheduler: str

    def node(self, name: str, audit: Audit) -> NodeStatus:
        """The node now."""
        ...

    def drain(
        self, node: str, reason: str, audit: Audit, *, category: str = "", incident: int = 0
    ) -> StepOutcome:
        """Take the node out with our reason (unless already out)."""
        ...

    def resume(self, node: str, audit: Audit) -> StepOutcome:
        """Put a node we took out back in service."""
        ...

    def clean_up(self, node: str, audit: Audit) -> StepOutcome:
        """Remove our marks from a node a person put back."""
        ...

    def checkpoint_hints(self, job_id: str, audit: Audit) -> list[tuple[str, str]]:
        """Checkpoint directories the job names itself."""
        ...

    def recover(
        self, action: Action, audit: Audit, save: Save, locate: Callable[[], None]
    ) -> StepOutcome:
        """One step of running the job again elsewhere; `locate()` finds the checkpoint (and
        the resume environment in params) and is called once the old run has stopped."""
        ...


@dataclass
class HealerContext:
    """Everything a healer pass works with; inputs are injected so tests feed real output."""

    factory: sessionmaker[Session]
    policy: Policy
    actors: dict[str, Actor] = field(default_factory=dict)
    runner: CommandRunner | None = None  # runs the configured validation / GPU reset commands
    fence: Callable[[Session], None] | None = None
    clock: Callable[[], float] = time.time
    checkpoint_settle_s: float = 0.25


def _settled(action: Action) -> bool:
    """Ended, or never going to run without a person (observe / proposed / waiting)."""
    return action.terminal or (
        action.state is ActionState.PLANNED and action.mode is not ActionMode.ACT
    )


class Steps:
    """Runs one step of an action and says how it came out."""

    def __init__(self, ctx: HealerContext) -> None:
        self.ctx = ctx

    def _incident(self, incident_id: int | None) -> Incident | None:
        if incident_id is None:
            return None
        with self.ctx.factory() as s:
            try:
                return incidents.get_incident(s, incident_id=incident_id)
            except Exception:
                return None

    def _siblings(self, action: Action) -> list[Action]:
        with self.ctx.factory() as s:
            return service.list_actions(s, incident_id=action.incident_id, limit=1000)

    def run(self, action: Action, audit: Audit, save: Save) -> StepOutcome:
        """One step; never raises for what a scheduler answers."""
        if action.kind is ActionKind.NOTIFY:
            return self._notify(action)
        actor = self.ctx.actors.get(action.scheduler or "") or self._actor_now(action)
        if actor is None:
            return StepOutcome.failed(f"no actor for scheduler {action.scheduler!r} here")
        if action.kind is ActionKind.DRAIN:
            if action.params.get("confirm"):
                st = actor.node(str(action.node), audit)
                if st.exists and st.healthy and not st.out:
                    return StepOutcome.done(
                        noop=True, holding=False, note="the scheduler sees the node healthy again"
                    )
            return actor.drain(
                str(action.node),
                action.reason,
                audit,
                category=str(action.params.get("category") or "unhealthy"),
                incident=int(action.incident_id or 0),
            )
        if action.kind is ActionKind.RESET_GPU:
            return self._reset(action, audit)
        if action.kind is ActionKind.RECOVER:
            if not action.params.get("prepared"):
                self._prepare(action, actor, audit)
                save(action.params)
            return actor.recover(action, audit, save, lambda: self._locate(action, audit))
        return self._return(action, actor, audit)

    def _actor_now(self, action: Action) -> Actor | None:
        """The actor of the scheduler the store knows now (a node or job may have been seen
        only by an agent when the action was planned)."""
        with self.ctx.factory() as s:
            if action.kind is ActionKind.RECOVER and action.job_id:
                job = queries.get_job(s, job_id=action.job_id) or {}
                known = job.get("scheduler")
            else:
                known = node_info(s, node=str(action.node)).scheduler if action.node else None
        return self.ctx.actors.get(str(known)) if known else None

    # --- recover ---

    def _dirs(self, action: Action, actor: Actor, audit: Audit) -> list[tuple[str, str]]:
        """Checkpoint directories in the issue's order: JobPatch, W&B config, the job's own
        comment/script/env, then the policy's pattern for its account or namespace."""
        with self.ctx.factory() as s:
            job = queries.get_job(s, job_id=str(action.job_id), scheduler=action.scheduler) or {}
            progress = queries.events_in_window(
                s, job_id=action.job_id, kind="progress", limit=1, newest_first=True
            )
        dirs = []
        if job.get("checkpoint_dir"):
            dirs.append(("job_patch", str(job["checkpoint_dir"])))
        cfg = (progress[0]["payload"] or {}).get("checkpoint_dir") if progress else None
        if cfg:
            dirs.append(("wandb_config", str(cfg)))
        dirs += actor.checkpoint_hints(str(action.job_id), audit)
        account = str(job.get("account") or "")
        for glob, pattern in self.ctx.policy.checkpoint_patterns.items():
            if fnmatch.fnmatchcase(account, glob):
                values = {
                    "user": job.get("user") or "",
                    "account": account,
                    "job_id": action.job_id,
                    "job_name": job.get("name") or "",
                }
                dirs.append(("pattern", pattern.format(**values)))
                break
        action.params["wandb_run"] = job.get("wandb_run")
        return dirs

    def _prepare(self, action: Action, actor: Actor, audit: Audit) -> None:
        """Where to look for checkpoints, which W&B run continues, which nodes to avoid."""
        p = action.params
        p["checkpoint_dirs"] = [list(d) for d in self._dirs(action, actor, audit)]
        # The incident's own node. Other nodes we hold are drained already (the scheduler
        # avoids them); pinning the job away from them too could leave it nowhere to run.
        p["exclude"] = [action.node] if action.node else []
        p["env"] = self._env(p)
        p["prepared"] = True

    @staticmethod
    def _env(p: dict[str, Any]) -> dict[str, str]:
        run = str(p.get("wandb_run") or "")
        env = {"FLEETMEDIC_RESUME_FROM": str(p.get("checkpoint") or "")}
        if run:
            env |= {"WANDB_RUN_ID": run.rstrip("/").split("/")[-1], "WANDB_RESUME": "allow"}
        return {k: v for k, v in env.items() if v}

    def _locate(self, action: Action, audit: Audit) -> None:
        """The newest complete checkpoint, looked up once the old run has stopped writing
        (the actor calls this right before the job starts again)."""
        p = action.params
        for source, d in p.get("checkpoint_dirs") or []:
            if not Path(d).is_dir():
                continue
            found = find_checkpoint(
                d, globs=self.ctx.policy.checkpoint_globs, settle_s=self.ctx.checkpoint_settle_s
            )
            p.update(checkpoint_source=source, checkpoint_dir=d)
            if found is not None:
                p.update(checkpoint=found.path, step=found.step, layout=found.layout)
            audit.note(
                f"checkpoint dir {d} (from {source}): "
                + (
                    f"{found.layout} step {found.step} at {found.path}"
                    if found
                    else "no complete checkpoint"
                )
            )
            break
        p["env"] = self._env(p)

    # --- GPU reset, return to service, notify ---

    def _command(
        self, template: list[str], audit: Audit, timeout_s: float, **values: Any
    ) -> tuple[bool, str]:
        if self.ctx.runner is None:
            return False, "no command runner is configured"
        argv = []
        for part in template:  # only {node}, {gpu}, {pci}: a shell's own braces stay as they are
            for key, value in values.items():
                part = part.replace("{" + key + "}", "" if value is None else str(value))
            argv.append(part)
        res = audit.command(self.ctx.runner, argv, timeout_s)
        return res.ok, (res.stderr or res.stdout or str(res.error)).strip()[-300:]

    def _reset(self, action: Action, audit: Audit) -> StepOutcome:
        ok, text = self._command(
            self.ctx.policy.gpu_reset_command,
            audit,
            300.0,
            node=action.node,
            gpu=action.params.get("gpu"),
            pci=action.params.get("pci"),
        )
        if ok:
            return StepOutcome.done(reset=True)
        fallback = action.model_copy(
            update={
                "id": None,
                "key": action.key.replace("reset_gpu:", "drain:", 1),
                "kind": ActionKind.DRAIN,
                "state": ActionState.PLANNED,
                "params": dict(action.params),
            }
        )
        return StepOutcome(
            "failed", {}, f"GPU reset failed ({text}); draining instead", follow_up=[fallback]
        )

    def _return(self, action: Action, actor: Actor, audit: Audit) -> StepOutcome:
        now, policy = self.ctx.clock(), self.ctx.policy
        inc = self._incident(action.incident_id)
        quiet_from = (inc.last_seen_ts if inc else 0.0) + policy.return_after_quiet_s
        if inc is not None and inc.state.value == "open" and quiet_from > now:
            return StepOutcome.wait(quiet_from, note="the fault's evidence has not stopped")
        st = actor.node(str(action.node), audit)
        if not st.out:
            return StepOutcome.done(noop=True, note="already back in service (a person resumed it)")
        if not st.ours:
            return StepOutcome.failed(f"taken over by a person ({st.reason}); never resumed by us")
        ok, text = self._command(
            policy.validation_command, audit, policy.validation_timeout_s, node=action.node
        )
        if not ok:
            alert = oncall_alert(
                key=f"return-failed:{action.id}",
                now=now,
                action=action,
                oncall=policy.oncall,
                subject=f"{action.node} failed validation and stays out",
                body=f"Validation of {action.node} failed: {text}. The node stays out of "
                "service until a person looks at it.",
            )
            return StepOutcome(
                "failed", {"kept_out": True}, f"validation failed: {text}", notices=[alert]
            )
        return actor.resume(str(action.node), audit)

    def _notify(self, action: Action) -> StepOutcome:
        inc = self._incident(action.incident_id)
        if inc is None:
            return StepOutcome.failed(f"incident {action.incident_id} is gone")
        others = [a for a in self._siblings(action) if a.id != action.id]
        now = self.ctx.clock()
        waited = now - action.created_ts
        if not all(_settled(a) for a in others) and waited < self.ctx.policy.notify_wait_s:
            return StepOutcome.wait(now + 0.5, note="waiting for the incident's actions to end")
        notices = incident_notices(inc, others, oncall=self.ctx.policy.oncall, now=now)
        return StepOutcome("done", {"notices": len(notices)}, notices=notices)
