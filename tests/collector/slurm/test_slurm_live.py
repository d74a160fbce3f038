"""SlurmSource against a REAL Slurm 22.05 cluster (cluster.sh): real jobs, real commands.

The time-out job is submitted when the module starts (Slurm's minimum limit is one minute and
its limit check runs every 30 s) and checked last, so the other tests run while it waits.
"""

from __future__ import annotations

import pytest

from collector.slurm import SlurmSource
from tests.collector.slurm.live import Seen, SlurmCluster, poll_until
from timeline.models import EventKind, Severity

pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.slow]


def ended(job_id: str, state: str):
    return lambda s: job_id in s.jobs and s.jobs[job_id].state == state


@pytest.fixture(scope="module")
def timeout_job(slurm_cluster: SlurmCluster) -> str:
    """A job with a one-minute limit that sleeps longer, submitted before the other tests."""
    return slurm_cluster.sbatch("--time=1", "--gres=gpu:1", "-J", "timeout", wrap="sleep 600")


@pytest.fixture(autouse=True)
def _start_timeout_job_early(timeout_job: str) -> None:
    """Request the time-out job for every test so it starts with the first one."""


def test_live_succeeding_gpu_job_is_completed_with_exit_0_and_log_path(
    slurm_cluster: SlurmCluster,
) -> None:
    jid = slurm_cluster.sbatch("--gres=gpu:2", "-J", "ok", wrap="echo ok")
    seen = poll_until(slurm_cluster.source(), Seen(), ended(jid, "COMPLETED"), "COMPLETED")
    job = seen.jobs[jid]
    assert (job.exit_code, job.gpus, job.name, job.cluster) == (0, 2, "ok", "fmtest")
    assert job.payload["stdout"] == f"{slurm_cluster.root}/jobs/ok-{jid}.out"
    assert job.start_ts and job.end_ts and job.submit_ts
    assert job.end_ts >= job.start_ts >= job.submit_ts


def test_live_failing_job_reports_exit_code_3(slurm_cluster: SlurmCluster) -> None:
    jid = slurm_cluster.sbatch("--gres=gpu:1", "-J", "fail", wrap="echo failing; exit 3")
    seen = poll_until(slurm_cluster.source(), Seen(), ended(jid, "FAILED"), "FAILED")
    assert seen.jobs[jid].exit_code == 3
    (event,) = [e for e in seen.job_events(jid) if e.payload["state"] == "FAILED"]
    assert (event.code, event.severity, event.dedup_key) == (
        3,
        Severity.ERROR,
        f"fmtest:{jid}:FAILED:0",
    )


def test_live_cancelled_job_closes_its_gpu_allocations(slurm_cluster: SlurmCluster) -> None:
    src = slurm_cluster.source()
    jid = slurm_cluster.sbatch("--gres=gpu:2", "-J", "cancelme", wrap="sleep 300")
    seen = poll_until(src, Seen(), lambda s: len(s.allocs(jid)) == 2, "GPU IDX while running")
    opened = seen.allocs(jid)
    assert all(a.end_ts is None for a in opened) and len({a.gpu_index for a in opened}) == 2
    slurm_cluster.run("scancel", jid)
    poll_until(src, seen, ended(jid, "CANCELLED"), "CANCELLED")
    poll_until(src, seen, lambda s: len(s.allocs(jid)) == 4, "allocations closed")
    closed = seen.allocs(jid)[2:]
    assert {a.gpu_index for a in closed} == {a.gpu_index for a in opened}
    assert all(a.end_ts is not None and a.end_ts >= a.start_ts for a in closed)


def test_live_requeued_job_counts_restarts_and_stores_each_state_once(
    slurm_cluster: SlurmCluster,
) -> None:
    src = slurm_cluster.source()
    script = 'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 300; fi; echo done'
    jid = slurm_cluster.sbatch("--requeue", "--gres=gpu:2", "-J", "requeue-me", wrap=script)
    seen = poll_until(src, Seen(), lambda s: bool(s.allocs(jid)), "first run holds GPUs")
    slurm_cluster.run("scontrol", "requeue", jid)
    poll_until(src, seen, ended(jid, "COMPLETED"), "rerun COMPLETED", deadline_s=45)
    job = seen.jobs[jid]
    assert job.restart_count == 1 and job.exit_code == 0
    assert [r["state"] for r in job.payload["requeues"]] == ["REQUEUED"]
    keys = [e.dedup_key for e in seen.job_events(jid)]
    assert len(keys) == len(set(keys))  # many polls, each state once
    for key in ("RUNNING:0", "REQUEUED:0", "RUNNING:1", "COMPLETED:1"):
        assert f"fmtest:{jid}:{key}" in keys
    first_run_closed = [a for a in seen.allocs(jid) if a.end_ts is not None]
    assert first_run_closed, "the first run's GPUs were not closed at the requeue"


def test_live_multinode_job_expands_nodes_and_records_gpus_on_both(
    slurm_cluster: SlurmCluster,
) -> None:
    src = slurm_cluster.source()
    jid = slurm_cluster.sbatch("-N", "2", "--gres=gpu:2", "-J", "multi", wrap="sleep 300")
    seen = poll_until(
        src,
        Seen(),
        lambda s: len({a.node for a in s.allocs(jid)}) == 2 and jid in s.jobs,
        "GPU IDX on two nodes",
    )
    nodes = {a.node for a in seen.allocs(jid)}
    assert sorted(seen.jobs[jid].nodes) == sorted(nodes) and len(nodes) == 2
    assert len(seen.allocs(jid)) == 4 and seen.jobs[jid].gpus == 4
    slurm_cluster.run("scancel", jid)
    poll_until(src, seen, ended(jid, "CANCELLED"), "CANCELLED")


def test_live_drained_node_reports_reason_and_who_drained_it(slurm_cluster: SlurmCluster) -> None:
    src = slurm_cluster.source()
    seen = poll_until(src, Seen(), lambda s: "node3" in s.nodes, "nodes listed")
    reason = "fleetmedic test: xid 79"
    slurm_cluster.run("scontrol", "update", "nodename=node3", "state=drain", f"reason={reason}")
    try:
        poll_until(src, seen, lambda s: s.nodes["node3"].reason == reason, "drain reason")
        node = seen.nodes["node3"]
        assert node.reason_user == "root" and node.reason_ts and node.unschedulable
        assert "DRAIN" in (node.state or "")
        (event,) = [e for e in seen.events if e.kind == EventKind.NODE_STATE]
        assert event.node == "node3" and event.payload["reason"] == reason
    finally:
        slurm_cluster.run("scontrol", "update", "nodename=node3", "state=resume")
    poll_until(src, seen, lambda s: not s.nodes["node3"].unschedulable, "resumed")
    states = [e.payload["condition"] for e in seen.events if e.kind == EventKind.NODE_STATE]
    assert states[-1] == []


def test_live_time_limit_gives_timeout(slurm_cluster: SlurmCluster, timeout_job: str) -> None:
    # Slurm checks limits every 30 s: a 1-minute job ends 60-90 s after it started.
    src = slurm_cluster.source()
    seen = poll_until(src, Seen(), ended(timeout_job, "TIMEOUT"), "TIMEOUT", 150, 2.0)
    job = seen.jobs[timeout_job]
    assert job.end_ts and job.start_ts and job.end_ts - job.start_ts >= 60
    # The batch step's record (SIGTERM) may reach accounting a poll after the job's. Slurm
    # records the TERM as the step's signal ("CANCELLED 0:15"), or (seen once on this VM under
    # load, 2026-11-29) as the batch step FAILED with return code 15 ("15:0", no signal): the
    # source must report what accounting holds, a signal only when it holds one
    poll_until(
        src,
        seen,
        lambda s: s.jobs[timeout_job].signal is not None or _batch_exit(src, timeout_job) == "15:0",
        "step signal",
    )
    want = None if _batch_exit(src, timeout_job) == "15:0" else 15
    assert seen.jobs[timeout_job].signal == want


def _batch_exit(src: SlurmSource, job_id: str) -> str | None:
    """The batch step's ExitCode ("rc:signal") as accounting holds it, or None."""
    res = src._run(["sacct", "-a", "-P", "-n", "-j", job_id, "--format=JobID,ExitCode"], 20)
    rows = [ln.split("|") for ln in res.stdout.splitlines()] if res.ok else []
    return next((r[1] for r in rows if len(r) == 2 and r[0] == f"{job_id}.batch"), None)


# Last in the module, so that no other test's job ends while slurmdbd is down: the time-out job
# used to end around this test, and once its step signal did not reach the source in time.
def test_live_accounting_down_is_counted_and_caught_up_after(slurm_cluster: SlurmCluster) -> None:
    src = slurm_cluster.source()
    jid = slurm_cluster.sbatch("--gres=gpu:1", "-J", "during-outage", wrap="sleep 3")
    seen = poll_until(src, Seen(), lambda s: bool(s.allocs(jid)), "GPU IDX while running")
    slurm_cluster.stop_slurmdbd()
    try:
        before = src.health.errors["sacct --json: exit_1"]
        seen.add(src.collect())
        assert src.health.errors["sacct --json: exit_1"] == before + 1
        assert seen.nodes  # scontrol still answers
        assert jid in seen.jobs  # the job as slurmctld holds it meanwhile
        poll_until(src, seen, lambda s: len(s.allocs(jid)) == 2, "allocation closed meanwhile")
    finally:
        slurm_cluster.start_slurmdbd()
    # The window did not advance while sacct failed: the job's end is read once it is back.
    poll_until(src, seen, ended(jid, "COMPLETED"), "COMPLETED after the outage", deadline_s=45)
    assert seen.jobs[jid].exit_code == 0
