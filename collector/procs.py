"""Which scheduler job a GPU process belongs to, read from /proc (environ and cgroup).

Slurm: SLURM_JOB_ID in /proc/PID/environ, else `job_<id>` in the cgroup path
(v1 `/slurm/uid_1000/job_42/step_0/task_0`, v2 `/system.slice/slurmstepd.scope/job_42/step_0/...`,
per Slurm's cgroup documentation). Kubernetes: the pod UID in the cgroup path, cgroupfs driver
`/kubepods/burstable/pod<uid>/<container>` or systemd driver
`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/...`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from collector.health import SourceHealth
from timeline.models import Scheduler

_SLURM_CGROUP = re.compile(r"/job_(\d+)(?:/|$)")
_POD_CGROUPFS = re.compile(
    r"/pod([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:/|$)"
)
_POD_SYSTEMD = re.compile(
    r"-pod([0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12})\.slice"
)
_SLURM_ENV = (b"SLURM_JOB_ID=", b"SLURM_JOBID=")


@dataclass(frozen=True)
class JobRef:
    """A job as seen from a node: scheduler and id (Slurm job id, or the Kubernetes pod UID)."""

    scheduler: Scheduler
    job_id: str


def job_from_cgroup(text: str) -> JobRef | None:
    """The job named by the contents of a /proc/PID/cgroup file, if any."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        m = _SLURM_CGROUP.search(path)
        if m:
            return JobRef(Scheduler.SLURM, m.group(1))
        m = _POD_CGROUPFS.search(path)
        if m:
            return JobRef(Scheduler.KUBERNETES, m.group(1))
        m = _POD_SYSTEMD.search(path)
        if m:
            return JobRef(Scheduler.KUBERNETES, m.group(1).replace("_", "-"))
    return None


def job_from_environ(data: bytes) -> JobRef | None:
    """The Slurm job in a NUL-separated /proc/PID/environ, if any."""
    for entry in data.split(b"\0"):
        for prefix in _SLURM_ENV:
            if entry.startswith(prefix):
                value = entry[len(prefix) :].decode("ascii", "replace").strip()
                if value.isdigit():
                    return JobRef(Scheduler.SLURM, value)
    return None


class ProcessJobMapper:
    """Maps PIDs to jobs under a /proc root (a constructor argument, so tests use a fake tree)."""

    def __init__(self, proc_root: str | Path = "/proc", *, health: SourceHealth | None = None):
        self.proc_root = Path(proc_root)
        self.health = health or SourceHealth("procs")
        # A PID's job never changes while the PID lives; key by (pid, start time) for reuse.
        self._cache: dict[tuple[int, str], JobRef | None] = {}

    def job_for_pid(self, pid: int) -> JobRef | None:
        """The job a process belongs to, or None (not a job, gone, or unreadable)."""
        base = self.proc_root / str(pid)
        key = (pid, self._start_time(base))
        if key in self._cache:
            return self._cache[key]
        ref = self._read_environ(base)
        if ref is None:
            ref = self._read_cgroup(base)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key] = ref
        return ref

    def _start_time(self, base: Path) -> str:
        try:
            stat = (base / "stat").read_text()
        except OSError:
            return ""
        # Field 22 (starttime) comes after the ')' that closes the command name.
        fields = stat.rsplit(")", 1)[-1].split()
        return fields[19] if len(fields) > 19 else ""

    def _read_environ(self, base: Path) -> JobRef | None:
        try:
            return job_from_environ((base / "environ").read_bytes())
        except PermissionError as exc:
            self.health.error("environ permission denied", exc)
        except OSError:
            pass  # the process exited between the NVML read and now
        return None

    def _read_cgroup(self, base: Path) -> JobRef | None:
        try:
            return job_from_cgroup((base / "cgroup").read_text(errors="replace"))
        except PermissionError as exc:
            self.health.error("cgroup permission denied", exc)
        except OSError:
            pass
        return None
