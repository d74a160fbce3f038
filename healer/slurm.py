"""Actions on a Slurm cluster through the injected command runner (as the Slurm source reads it).

Every action first looks whether its change is already in place, so running it again (a retry,
a resume after SIGKILL) never acts twice:

- drain: `scontrol show node` -> already drained with our reason? done. Drained by a person?
  leave it and never touch it again. Else `scontrol update nodename=X state=drain reason=...`.
- recover, requeueable job: `scontrol requeue` only while Restarts has not grown past the count
  persisted before the first attempt. Requeue sets the job's begin time to now + cred_expire + 1
  (src/slurmctld/job_mgr.c, batch_requeue_fini(): "now + cred_lifetime + 1", 120 s by default
  from src/common/slurm_cred.c DEFAULT_EXPIRATION_WINDOW), so a requeued job waits two minutes.
  An operator (or the job's owner) may move the begin time: _update_job() in job_mgr.c accepts
  StartTime for a PENDING job and clamps a past time to now, and _slurm_rpc_update_job() in
  src/slurmctld/proc_req.c calls queue_job_scheduler() afterwards, so `scontrol update jobid=N
  StartTime=now ExcNodeList=<drained>` once the job is PENDING gets it scheduled at once with
  Slurm's default timing settings (no cred_expire or sched_interval tuning).
- recover, other jobs: save the batch script (`scontrol write batch_script N -`), cancel the old
  job if it still holds nodes, look for a resubmission carrying this action's marker in its
  comment (a crash after sbatch), else `sbatch` with the original options, `--exclude` and
  `--export=ALL,FLEETMEDIC_RESUME_FROM=...,WANDB_RUN_ID=...,WANDB_RESUME=allow`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collector.slurm.parse import ParseError
from collector.slurm.runner import CommandRunner
from collector.slurm.scontrol import ScontrolJob, parse_scontrol_jobs, parse_scontrol_nodes
from healer.audit import Audit
from healer.models import Action, NodeStatus, StepOutcome
from healer.safety import is_ours
from healer.slurm_submit import checkpoint_hints, hosts, resubmit_marker, sbatch_args

Save = Callable[[dict[str, Any]], None]
ACTIVE = frozenset({"RUNNING", "PENDING", "SUSPENDED", "CONFIGURING", "REQUEUED", "RESIZING"})
_OUT_FLAGS = frozenset({"DRAIN", "DRAINED", "DRAINING"})
_SICK = frozenset({"DOWN", "FAIL", "FAILING", "NOT_RESPONDING", "INVAL", "UNKNOWN"})


class SlurmActor:
    """Drains, resumes, validates and recovers on one Slurm cluster."""

    scheduler = "slurm"

    def __init__(
        self,
        runner: CommandRunner,
        *,
        cluster: str = "default",
        script_dir: Path,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        poll_s: float = 0.2,
    ) -> None:
        self.runner = runner
        self.cluster = cluster
        self.script_dir = script_dir
        self.timeout_s = timeout_s
        self.clock = clock
        self.poll_s = poll_s

    # --- nodes ---

    def node(self, name: str, audit: Audit) -> NodeStatus:
        """The node as slurmctld holds it now."""
        res = audit.command(self.runner, ["scontrol", "show", "node", name], self.timeout_s)
        if not res.ok:
            return NodeStatus(name=name, exists=False, reason=res.stderr.strip() or res.error)
        try:
            nodes, _ = parse_scontrol_nodes(res.stdout)
        except ParseError:
            nodes = []
        found = next((n for n in nodes if n.name == name), None)
        if found is None:
            return NodeStatus(name=name, exists=False)
        out = bool(_OUT_FLAGS & {found.base_state, *found.flags})
        return NodeStatus(
            name=name,
            out=out,
            reason=found.reason,
            ours=out and is_ours(found.reason),
            state=found.state,
            partitions=found.partitions,
            healthy=not (_SICK & {found.base_state, *found.flags}),
        )

    def drain(
        self, node: str, reason: str, audit: Audit, *, category: str = "", incident: int = 0
    ) -> StepOutcome:
        """Drain with our reason unless already out; a person's drain is left as it is.

        (The reason already names the category and incident; Kubernetes needs them apart.)
        """
        st = self.node(node, audit)
        if not st.exists:
            return StepOutcome.failed(f"slurmctld does not know node {node}: {st.reason}")
        if st.out and st.ours:
            audit.note(f"{node} is already drained by us: {st.reason}")
            return StepOutcome.done(holding=True, drained=True, already=True)
        if st.out:
            audit.note(f"{node} was already drained by a person ({st.reason}); not ours to touch")
            return StepOutcome.done(holding=False, noop=True, person_reason=st.reason)
        argv = ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]
        res = audit.command(self.runner, argv, self.timeout_s)
        if not res.ok:
            return StepOutcome.failed(f"drain failed: {res.stderr.strip() or res.error}")
        return StepOutcome.done(holding=True, drained=True)

    def resume(self, node: str, audit: Audit) -> StepOutcome:
        """Put a node we drained back in service (never one we do not own)."""
        st = self.node(node, audit)
        if not st.out:
            return StepOutcome.done(noop=True, note=f"{node} is already in service")
        if not st.ours:
            return StepOutcome.failed(f"{node} is drained by someone else ({st.reason}); not ours")
        res = audit.command(
            self.runner, ["scontrol", "update", f"nodename={node}", "state=resume"], self.timeout_s
        )
        if not res.ok:
            return StepOutcome.failed(f"resume failed: {res.stderr.strip() or res.error}")
        return StepOutcome.done(resumed=True)

    def clean_up(self, node: str, audit: Audit) -> StepOutcome:
        """A person resumed our drain: Slurm keeps nothing of ours on the node to remove."""
        return StepOutcome.done(cleaned=True)

    # --- jobs ---

    def job(self, job_id: str, audit: Audit) -> ScontrolJob | None:
        """The job as slurmctld holds it (None once purged after MinJobAge)."""
        res = audit.command(self.runner, ["scontrol", "show", "job", "-d", job_id], self.timeout_s)
        if not res.ok:
            return None
        try:
            jobs, _ = parse_scontrol_jobs(res.stdout)
        except ParseError:
            return None
        return next((j for j in jobs if j.job_id == job_id), None)

    def checkpoint_hints(self, job_id: str, audit: Audit) -> list[tuple[str, str]]:
        """Checkpoint directories the job names: its --comment, then its batch script's env."""
        job = self.job(job_id, audit)
        if job is None:
            return []
        return checkpoint_hints(job.fields.get("Comment"), self._script(job_id, audit))

    def _script(self, job_id: str, audit: Audit) -> str | None:
        argv = ["scontrol", "write", "batch_script", job_id, "-"]
        res = audit.command(self.runner, argv, self.timeout_s)
        return res.stdout if res.ok and res.stdout.strip() else None

    def recover(
        self, action: Action, audit: Audit, save: Save, locate: Callable[[], None]
    ) -> StepOutcome:
        """One step of recovering a job: requeue it, or resubmit it (see the module doc)."""
        assert action.job_id is not None
        p = action.params
        job = self.job(action.job_id, audit)
        if "method" not in p:
            if job is None:
                return StepOutcome.failed(
                    f"job {action.job_id} is no longer held by slurmctld (MinJobAge passed); "
                    "it cannot be requeued or its script read: resubmit it by hand"
                )
            if job.state in ("COMPLETED", "CANCELLED"):
                # Finished well, or stopped by its owner or an admin: not ours to run again.
                return StepOutcome.done(noop=True, note=f"job is {job.state}: not recovered")
            requeue = job.fields.get("Requeue") == "1" and job.fields.get("BatchFlag") == "1"
            p.update(method="requeue" if requeue else "resubmit", restarts_before=job.restarts)
            p["phase"] = "start"
            save(p)
        if p["method"] == "requeue":
            return self._requeue(action, job, audit, save, locate)
        return self._resubmit(action, job, audit, save, locate)

    def _requeue(
        self, action: Action, job: ScontrolJob | None, audit: Audit, save: Save, locate: Any
    ) -> StepOutcome:
        p, jid = action.params, str(action.job_id)
        if job is None:
            return StepOutcome.failed(f"job {jid} vanished from slurmctld while being requeued")
        if p["phase"] == "start":
            if job.restarts > int(p["restarts_before"]):
                audit.note(f"job {jid} was already requeued (Restarts={job.restarts})")
            elif job.state == "PENDING":
                audit.note(f"job {jid} has not started: it only needs the bad nodes excluded")
            else:
                res = audit.command(self.runner, ["scontrol", "requeue", jid], self.timeout_s)
                if not res.ok:
                    return StepOutcome.failed(f"requeue failed: {res.stderr.strip() or res.error}")
            p["phase"] = "release"
            save(p)
            job = self.job(jid, audit)
            if job is None:
                return StepOutcome.failed(f"job {jid} vanished from slurmctld after requeue")
        if job.state != "PENDING":
            if job.state in ("RUNNING", "CONFIGURING") and job.restarts > int(p["restarts_before"]):
                return StepOutcome.done(how="requeue", new_job_id=jid, restarts=job.restarts)
            return StepOutcome.wait(self.clock() + self.poll_s, note=f"job is {job.state}")
        # PENDING again: the old run's processes are gone and its last checkpoint is final.
        # (The rerun resumes by itself: a requeued job keeps its environment.)
        locate()
        save(action.params)
        return self._release(action, job, audit)

    def _release(self, action: Action, job: ScontrolJob, audit: Audit) -> StepOutcome:
        """Exclude the bad nodes and clear the requeue begin time (see the module doc)."""
        bad = set(action.params.get("exclude") or [])
        exc = sorted(set(hosts(job.fields.get("ExcNodeList"))) | bad)
        argv = ["scontrol", "update", f"jobid={job.job_id}", "StartTime=now"]
        if exc:
            argv.append(f"ExcNodeList={','.join(exc)}")
        req = hosts(job.fields.get("ReqNodeList"))
        if req and bad & set(req):
            # A job pinned to a node we took out could never start: it may go anywhere else.
            argv.append(f"ReqNodeList={','.join(n for n in req if n not in bad)}")
        res = audit.command(self.runner, argv, self.timeout_s)
        if not res.ok:
            return StepOutcome.failed(f"update of the requeued job failed: {res.stderr.strip()}")
        requeued = job.restarts > int(action.params.get("restarts_before", job.restarts))
        how = "requeue" if requeued else "exclude"  # a job that never started was only moved
        return StepOutcome.done(how=how, new_job_id=job.job_id, restarts=job.restarts)

    def _resubmit(
        self, action: Action, job: ScontrolJob | None, audit: Audit, save: Save, locate: Any
    ) -> StepOutcome:
        p, jid = action.params, str(action.job_id)
        marker = resubmit_marker(self.cluster, jid, int(action.id or 0))
        if p["phase"] == "start":
            if job is None:
                return StepOutcome.failed(f"job {jid} vanished before its script was saved")
            script = self._script(jid, audit)
            if script is None:
                return StepOutcome.failed(f"the batch script of job {jid} is not available")
            self.script_dir.mkdir(parents=True, exist_ok=True)
            path = self.script_dir / f"resubmit-{self.cluster}-{jid}-{action.id}.sh"
            path.write_text(script, encoding="utf-8")
            os.chmod(path, 0o700)
            p["script"], p["fields"] = str(path), job.fields
            p["phase"] = "cancel"
            save(p)
        if p["phase"] == "cancel":
            if job is not None and job.state in ACTIVE:
                res = audit.command(self.runner, ["scancel", jid], self.timeout_s)
                if not res.ok:
                    return StepOutcome.failed(f"scancel failed: {res.stderr.strip()}")
            p["phase"] = "stopping"
            save(p)
        if job is not None and job.state in ACTIVE | {"COMPLETING"}:
            return StepOutcome.wait(self.clock() + self.poll_s, note=f"old job is {job.state}")
        new_id = self._find_marker(marker, audit)
        if new_id is None:
            locate()  # the old run has stopped: its newest complete checkpoint is final
            p["sbatch"] = sbatch_args(
                p["fields"],
                job_id=jid,
                exclude=p.get("exclude") or [],
                env=p.get("env") or {},
                marker=marker,
            )
            save(p)
            res = audit.command(self.runner, ["sbatch", *p["sbatch"], p["script"]], self.timeout_s)
            if not res.ok:
                return StepOutcome.failed(f"sbatch failed: {res.stderr.strip() or res.error}")
            new_id = res.stdout.strip().split(";")[0]
        else:
            audit.note(f"job {new_id} already carries this resubmission's marker")
        return StepOutcome.done(how="resubmit", new_job_id=new_id)

    def _find_marker(self, marker: str, audit: Audit) -> str | None:
        argv = ["squeue", "--noheader", "--states=all", "--format=%i|%k"]
        res = audit.command(self.runner, argv, self.timeout_s)
        for line in res.stdout.splitlines() if res.ok else []:
            job_id, _, comment = line.partition("|")
            if marker in comment:
                return job_id.strip()
        return None
