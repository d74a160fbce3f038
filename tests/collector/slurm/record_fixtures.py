"""Re-record tests/fixtures/slurm/live/ from a real cluster.

    .venv/bin/python -m tests.collector.slurm.record_fixtures

Runs one scenario (ok, exit 3, scancel, requeue, -N 2, drain, 1-minute time-out) on a fresh
cluster.sh cluster and saves what the exact commands SlurmSource runs printed: while the jobs
run, and after they all ended. Needs root; takes about two minutes (the time-out job).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from collector.slurm.parse import SACCT_PSV_FIELDS
from tests.collector.slurm.live import SlurmCluster

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "slurm" / "live"


def snapshot(c: SlurmCluster, tag: str) -> None:
    """Save the four commands' output under OUT with a tag."""
    start = "now-3600"
    outputs = {
        "sacct_json": c.run("sacct", "--json", "-a", "-S", start, "-E", "now"),
        "sacct_psv": c.run(
            "sacct", "-P", "-D", "-a", "-S", start, "-E", "now", f"--format={SACCT_PSV_FIELDS}"
        ),
        "scontrol_show_job_d": c.run("scontrol", "show", "job", "-d"),
        "scontrol_show_node": c.run("scontrol", "show", "node"),
    }
    for name, text in outputs.items():
        ext = "json" if name.endswith("json") else "txt"
        (OUT / f"{tag}_{name}.{ext}").write_text(text + "\n")


def wait(c: SlurmCluster, job: str, states: set[str], limit: float) -> None:
    """Wait until scontrol shows the job in one of `states`."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        out = c.run("scontrol", "show", "job", job)
        if any(f"JobState={s} " in out for s in states):
            return
        time.sleep(0.5)
    raise SystemExit(f"job {job} never reached {states}")


def main() -> int:
    """Run the scenario and write the fixtures."""
    OUT.mkdir(parents=True, exist_ok=True)
    c = SlurmCluster.start()
    try:
        tmo = c.sbatch("--time=1", "--gres=gpu:1", "-J", "timeout", wrap="sleep 600")
        ok = c.sbatch("--gres=gpu:2", "-J", "ok", wrap="echo ok")
        fail = c.sbatch("--gres=gpu:1", "-J", "fail", wrap="echo failing; exit 3")
        cancel = c.sbatch("--gres=gpu:2", "-J", "cancelme", wrap="sleep 300")
        script = 'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 300; fi; sleep 5; echo done'
        rq = c.sbatch("--requeue", "--gres=gpu:4", "-J", "requeue-me", wrap=script)
        multi = c.sbatch("-N", "2", "--gres=gpu:3", "-J", "multi", wrap="sleep 20")
        for j in (cancel, rq, multi):
            wait(c, j, {"RUNNING"}, 30)
        wait(c, ok, {"COMPLETED"}, 30)
        wait(c, fail, {"FAILED"}, 30)
        c.run("scancel", cancel)
        c.run("scontrol", "update", "nodename=node3", "state=drain", "reason=fleetmedic: xid 79")
        c.run("scontrol", "requeue", rq)
        wait(c, rq, {"RUNNING"}, 30)
        snapshot(c, "running")
        c.run("scontrol", "update", "nodename=node3", "state=resume")
        for j in (rq, multi):
            wait(c, j, {"COMPLETED"}, 60)
        wait(c, tmo, {"TIMEOUT"}, 150)
        time.sleep(2)  # let slurmdbd write the last end records
        snapshot(c, "ended")
        ids = dict(timeout=tmo, ok=ok, fail=fail, cancel=cancel, requeue=rq, multi=multi)
        (OUT / "jobs.txt").write_text("".join(f"{k}={v}\n" for k, v in ids.items()))
    finally:
        c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
