"""The real throwaway Slurm cluster (cluster.sh) as a Python handle, plus polling helpers."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from collector.base import Observations
from collector.slurm import SlurmSource, SubprocessRunner
from timeline.models import Allocation, Event, Job, Node

SCRIPT = Path(__file__).with_name("cluster.sh")
T = TypeVar("T")


def why_no_slurm() -> str | None:
    """None when this machine can run the cluster script, else the reason it cannot."""
    if os.name != "posix" or not Path("/proc").is_dir():
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (mknod of fake GPUs, daemons, apt-get install)"
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        return "Slurm is not installed and apt-get is not available to install it"
    return None


def cluster_or_skip(start: Callable[[], T]) -> T:
    """start() a test cluster; skip loudly when this machine cannot run one, or fail instead
    under REQUIRE_SLURM=1 (CI), naming the reason."""
    import pytest

    required = os.environ.get("REQUIRE_SLURM", "") == "1"
    reason = why_no_slurm()
    if reason:
        if required:
            pytest.fail(f"REQUIRE_SLURM=1 but no real Slurm can run here: {reason}")
        pytest.skip(f"SKIPPED (no real Slurm): {reason}; CI runs these with REQUIRE_SLURM=1")
    try:
        return start()
    except Exception as exc:  # a failed install or start: the reason is in the message
        if required:
            pytest.fail(f"REQUIRE_SLURM=1 but the Slurm test cluster did not start: {exc}")
        pytest.skip(f"SKIPPED (Slurm test cluster did not start): {exc}")


def _alive(pid: int) -> bool:
    """Running and not a zombie (killed daemons stay Z until PID 1 reaps them)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@dataclass
class SlurmCluster:
    """A started cluster: its directory and client environment."""

    root: Path
    slurm_conf: str

    @classmethod
    def start(cls, timeout_s: float = 600) -> SlurmCluster:
        """Install when missing, start, wait for idle nodes; raise RuntimeError with the output."""
        root = Path(tempfile.mkdtemp(prefix="fm-slurm-"))
        proc = subprocess.run(
            ["bash", str(SCRIPT), "start", str(root)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if proc.returncode != 0:
            subprocess.run(["bash", str(SCRIPT), "stop", str(root)], timeout=120, check=False)
            raise RuntimeError(f"cluster.sh start failed ({proc.returncode}):\n{proc.stderr}")
        return cls(root=root, slurm_conf=str(root / "etc" / "slurm.conf"))

    def stop(self) -> None:
        """Tear everything down and remove the directory."""
        subprocess.run(["bash", str(SCRIPT), "stop", str(self.root)], timeout=120, check=False)

    def run(self, *argv: str) -> str:
        """Run a Slurm client command against this cluster; raise on failure."""
        env = dict(os.environ, SLURM_CONF=self.slurm_conf)
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, env=env, timeout=30, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} -> {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def stop_slurmdbd(self) -> None:
        """Stop the accounting daemon (by its PID file) and wait until it is gone."""
        pid = int((self.root / "run" / "slurmdbd.pid").read_text().strip())
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 10
        while time.monotonic() < end and _alive(pid):
            time.sleep(0.1)

    def start_slurmdbd(self) -> None:
        """Start the accounting daemon again and wait until it answers."""
        self.run("slurmdbd")
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                self.run("sacctmgr", "-n", "list", "cluster")
                return
            except RuntimeError:
                time.sleep(0.2)
        raise RuntimeError("slurmdbd did not come back")

    def sbatch(self, *args: str, wrap: str) -> str:
        """Submit a batch job; return its id."""
        jobs = self.root / "jobs"
        return self.run(
            "sbatch",
            "--parsable",
            f"--chdir={jobs}",
            f"--output={jobs}/%x-%j.out",
            *args,
            f"--wrap={wrap}",
        ).split(";")[0]

    def source(self, lookback_s: float = 3600.0) -> SlurmSource:
        """A SlurmSource reading this cluster through the real commands."""
        runner = SubprocessRunner(slurm_conf=self.slurm_conf)
        return SlurmSource(runner, time.time, cluster="fmtest", lookback_s=lookback_s)


@dataclass
class Seen:
    """Everything a source reported over several polls; the latest Job/Node per id wins."""

    jobs: dict[str, Job] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    allocations: list[Allocation] = field(default_factory=list)

    def add(self, obs: Observations) -> None:
        """Fold one poll in."""
        self.jobs.update({j.job_id: j for j in obs.jobs})
        self.nodes.update({n.name: n for n in obs.nodes})
        self.events.extend(obs.events)
        self.allocations.extend(obs.allocations)

    def job_events(self, job_id: str) -> list[Event]:
        """JOB_STATE events of one job, in arrival order."""
        return [e for e in self.events if e.job_id == job_id]

    def allocs(self, job_id: str) -> list[Allocation]:
        """Allocation observations of one job, in arrival order."""
        return [a for a in self.allocations if a.job_id == job_id]


def poll_until(
    source: SlurmSource,
    seen: Seen,
    done: Callable[[Seen], bool],
    what: str,
    deadline_s: float = 30.0,
    every_s: float = 0.5,
) -> Seen:
    """Collect until done(seen) or the deadline; fail with what was seen."""
    end = time.monotonic() + deadline_s
    while True:
        seen.add(source.collect())
        if done(seen):
            return seen
        if time.monotonic() > end:
            states = {k: (j.state, j.exit_code, j.signal, j.nodes) for k, j in seen.jobs.items()}
            health = {
                "errors": dict(source.health.errors),
                "parse": dict(source.health.parse_failures),
            }
            raise AssertionError(
                f"not within {deadline_s}s: {what}; jobs seen: {states}; source health: {health}; "
                f"sacct -P steps: {_sacct_steps(source)}"
            )
        time.sleep(every_s)


def _sacct_steps(source: SlurmSource) -> str:
    """What accounting itself holds (job and step lines), for a failure message."""
    result = source._run(["sacct", "-a", "-P", "-D", "--format=JobID,State,ExitCode,Start,End"], 20)
    return result.stdout[-1500:] if result.ok else f"sacct failed: {result.error}"
