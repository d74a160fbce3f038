"""`fleetmedic bench recovery --json`: from an Xid line to a job training again elsewhere.

On a real Slurm 22.05 cluster started with Slurm's default timing settings, with a real server
(Slurm + W&B sources, correlator, healer acting) and one real agent per node following a
kernel-log file (benchmarks/_slurm_stack.py). Each hardware trial starts a checkpointing
training job with a real offline W&B run, appends a real-format Xid 79 line to its node's file
and measures from the moment the line is written:

  (a) drain_*   until `scontrol show node` shows the node drained with our reason;
  (b) running_* until the job is RUNNING on another node (a requeued job, or the resubmission);
  (c) resumed_* until the job's output shows its first training step after resuming.

Even trials are single-node requeueable jobs (requeue), odd ones two-node `--no-requeue` jobs
(resubmission as one gang). User-fault trials append an Xid 31 instead: no node may be drained.
Between trials the node is resumed as a person would. Needs root and the repository's tests/.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._slurm_stack import Stack, start_cluster, stop_cluster, wait_for

POLICY = """# The benchmark breaks the same three nodes again and again: no limits get in the way
# (the breaker counts drains in a 1 s window: 100 % of 3 nodes would allow 3 drains an hour).
breaker_max_nodes = 1000
breaker_max_fraction = 1.0
breaker_window_s = 1.0
node_heal_limit = 1000
gpu_fatal_limit = 1000
flap_window_s = 0
[[act]]
cluster = "*"
# Only what the trials inject: a slurmd slow to answer under load (a node-state fault) must
# not take a node out between trials.
[[rules]]
name = "gpu-hardware"
category = ["gpu_hardware"]
blame = ["node"]
actions = ["drain", "recover", "notify"]
[[rules]]
name = "user-fault"
category = ["user_code", "oom_gpu", "oom_host"]
actions = ["notify"]
"""
_RESUMED = re.compile(r"resumed from step (\d+)")
_POLL_S = 0.05


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 3)


def _slurm_settings(stack: Stack) -> dict[str, Any]:
    """What the cluster really runs with (scontrol show config), and what was tuned: nothing."""
    conf = stack.slurm("scontrol", "show", "config")
    keys = (
        "AuthInfo",
        "SchedulerParameters",
        "KillWait",
        "BatchStartTimeout",
        "MinJobAge",
        "SlurmdTimeout",
        "JobRequeue",
        "ReturnToService",
    )
    found = {
        k: m.group(1).strip() for k in keys if (m := re.search(rf"^{k}\s*=\s*(.*)$", conf, re.M))
    }
    return {
        "tuned": {},
        "timing": "Slurm defaults: no cred_expire, sched_interval, bf_interval or KillWait set",
        "config": found,
        "requeue_begin_time": "cleared by the healer with scontrol update StartTime=now",
    }


class Trials:
    """Runs trials on a started stack and keeps their timings."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.rows: list[dict[str, Any]] = []
        self.user_fault_drains = 0
        self.n = 0

    def _job(self, gang: bool) -> tuple[str, str, list[str], Path]:
        st = self.stack
        self.n += 1
        name, ckpt = f"bench{self.n}", st.work / "ckpt" / f"bench{self.n}"
        opts = ["--no-requeue", "-N", "2"] if gang else ["--requeue"]
        jid = st.sbatch(
            name,
            *opts,
            "--gres=gpu:1",
            f"--comment=checkpoint_dir={ckpt}",
            script=st.train_script(ckpt, save_every=5, config_dir=0),
        )
        wait_for(lambda: st.job(jid).get("JobState") == "RUNNING", f"job {jid} running", 120)
        wait_for(lambda: (ckpt / "checkpoint-5").is_dir(), "a first checkpoint", 120)
        wait_for(lambda: st.known_running(jid), "the server stored the job", 60)
        if gang:  # a resubmission passes the W&B run id on
            wait_for(lambda: st.api(f"/api/v1/jobs/{jid}").get("wandb_run"), "W&B linked", 90)
        nodes = st.slurm("scontrol", "show", "hostnames", st.job(jid)["NodeList"]).split()
        return name, jid, nodes, ckpt

    def _running_elsewhere(self, name: str, jid: str, bad: str) -> str | None:
        """The id of this job's run that is RUNNING away from the bad node, if any."""
        st = self.stack
        out = st.slurm("squeue", "-h", "-n", name, "-t", "R", "-o", "%i %N", check=False)
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            hosts = st.slurm("scontrol", "show", "hostnames", parts[1], check=False).split()
            rerun = parts[0] != jid or st.job(jid).get("Restarts", "0") != "0"
            if bad not in hosts and rerun:
                return parts[0]
        return None

    def hardware(self, gang: bool, bus: str) -> None:
        """One Xid 79 trial: timings (a), (b), (c) and whether the resumed step matched."""
        st = self.stack
        name, jid, nodes, _ = self._job(gang)
        bad = nodes[-1]
        t0 = st.xid(bad, 79, bus)
        row: dict[str, Any] = {"job": jid, "gang": gang, "node": bad}
        new: str | None = None
        deadline = time.time() + 180
        while time.time() < deadline and "resumed" not in row:
            now = time.time()
            if "drain" not in row:
                state, reason = st.node(bad)
                if "DRAIN" in state and reason.startswith("fleetmedic:"):
                    row["drain"] = now - t0
            if "running" not in row:
                new = self._running_elsewhere(name, jid, bad)
                if new is not None:
                    row["running"], row["new_job"] = now - t0, new
            if new is not None:
                out = st.output(name, new)
                m = _RESUMED.search(out)
                if m and f"step {int(m.group(1)) + 1}" in out[m.end() :]:
                    row["resumed"], row["step"] = now - t0, int(m.group(1))
            time.sleep(_POLL_S)
        recover = st.actions(kind="recover", job_id=jid)
        found = recover[0]["params"].get("step") if recover else None
        row["step_ok"] = row.get("step") is not None and row.get("step") == found
        self.rows.append(row)
        self._cleanup()

    def user_fault(self, bus: str) -> None:
        """One Xid 31 trial: the owner is told; count nodes we drained (must be none)."""
        st = self.stack
        _, jid, nodes, _ = self._job(False)
        st.xid(nodes[0], 31, bus)
        wait_for(
            lambda: any(n["job_id"] == jid for n in st.api("/api/v1/healer/notices")),
            "the owner told",
            60,
        )
        time.sleep(1.0)  # anything wrongly planned would have run by now
        self.user_fault_drains += sum(1 for n in nodes if st.node(n)[1].startswith("fleetmedic:"))
        self._cleanup()

    def _cleanup(self) -> None:
        """No jobs, every node back in service (as a person would), before the next trial."""
        self.stack.reset()


def _ingest_latency(stack: Stack) -> list[float]:
    """Line written -> event stored on the server, for every Xid of the run."""
    with sqlite3.connect(stack.work / "server.db") as conn:
        rows = conn.execute("select received_ts - ts from events where kind = 'xid'").fetchall()
    return [float(r[0]) for r in rows]


def _report(trials: Trials, stack: Stack, args: argparse.Namespace) -> dict[str, Any]:
    rows = trials.rows
    col = {k: [r[k] for r in rows if k in r] for k in ("drain", "running", "resumed")}
    by = {
        g: [r["running"] for r in rows if r["gang"] is g and "running" in r] for g in (False, True)
    }
    ingest = _ingest_latency(stack)
    return {
        "trials": len(rows),
        "drain_p50_s": _pct(col["drain"], 50),
        "drain_p95_s": _pct(col["drain"], 95),
        "running_p50_s": _pct(col["running"], 50),
        "running_p95_s": _pct(col["running"], 95),
        "resumed_p50_s": _pct(col["resumed"], 50),
        "resumed_p95_s": _pct(col["resumed"], 95),
        "resumed_step_ok": sum(1 for r in rows if r["step_ok"]),
        "user_fault_trials": args.user_faults,
        "user_fault_drains": trials.user_fault_drains,
        "slurm_settings": _slurm_settings(stack),
        "running_p95_requeue_s": _pct(by[False], 95),
        "running_p95_resubmit_s": _pct(by[True], 95),
        "missed": {k: len(rows) - len(v) for k, v in col.items()},
        "ingest_p50_s": _pct(ingest, 50),
        "ingest_p95_s": _pct(ingest, 95),
        "poll_interval_s": _POLL_S,
        "machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end",
    }


def run(argv: list[str]) -> dict[str, Any]:
    """Run the benchmark; see the module doc."""
    parser = argparse.ArgumentParser(prog="fleetmedic bench recovery")
    parser.add_argument("--trials", type=int, default=20, help="Xid 79 trials (>= 20)")
    parser.add_argument("--user-faults", type=int, default=4, help="Xid 31 trials")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per API poll otherwise
    root, conf = start_cluster("default")
    work = Path(tempfile.mkdtemp(prefix="fm-bench-recovery-"))
    stack = Stack(work, cluster_root=root, slurm_conf=conf, policy=POLICY)
    try:
        stack.start()
        trials = Trials(stack)
        for i in range(args.trials):
            trials.hardware(gang=i % 2 == 1, bus=f"0000:{(0x10 + i) % 0xFF:02x}:00")
        for i in range(args.user_faults):
            trials.user_fault(bus=f"0000:{(0x90 + i) % 0xFF:02x}:00")
        return _report(trials, stack, args)
    finally:
        stack.stop()
        stop_cluster(root)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
