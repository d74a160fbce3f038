"""PID -> job from /proc: Slurm environ and cgroup paths (v1, v2), Kubernetes pod UIDs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collector.procs import JobRef, ProcessJobMapper, job_from_cgroup, job_from_environ
from timeline.models import Scheduler

# Shapes from Slurm's cgroup v2 documentation (slurm.schedmd.com/cgroup_v2.html), its v1
# hierarchy (/slurm/uid_<uid>/job_<id>/step_<n>/task_<n>; /slurm_<node>/... with
# MULTIPLE_SLURMD, seen in shared/reference/slurm-22.05/RECIPE.md), and Kubernetes cgroup paths
# as published: cgroupfs driver (github.com/Qard/container-info test/fixtures/result.js) and
# systemd driver (kubepods-burstable-pod<uid with _>.slice, e.g. Kubernetes node e2e notes).
SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"
SLURM_V1 = (
    "12:memory:/slurm/uid_1000/job_4243/step_batch/task_0\n"
    "11:devices:/slurm/uid_1000/job_4243/step_batch\n"
    "1:name=systemd:/system.slice/slurmd.service\n"
)
SLURM_MULTI = "4:freezer:/slurm_node2/uid_0/job_17/step_0/task_0\n"
K8S_CGROUPFS = (
    "11:devices:/kubepods/besteffort/pod74c13223-5a00-11e9-b385-42010a80018d/"
    "34dc0b5e626f2c5c4c5170e34b10e7654ce36f0fcd532739f4445baabea03376\n"
)
K8S_SYSTEMD = (
    "0::/kubepods.slice/kubepods-burstable.slice/"
    "kubepods-burstable-pod1c178021_5860_4495_a1ab_f9ac17877672.slice/"
    "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n"
)
K8S_GUARANTEED = (
    "0::/kubepods.slice/kubepods-pod0b7632a2_a56e_4278_987a_22de18008dbe.slice/"
    "crio-0bc5eac79e3ae7a0c2651f14722aa10fa333eb2325c2ca97da33aa284cda81b0.scope\n"
)
NOT_A_JOB = "0::/user.slice/user-1000.slice/session-3.scope\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SLURM_V2, JobRef(Scheduler.SLURM, "4242")),
        (SLURM_V1, JobRef(Scheduler.SLURM, "4243")),
        (SLURM_MULTI, JobRef(Scheduler.SLURM, "17")),
        (K8S_CGROUPFS, JobRef(Scheduler.KUBERNETES, "74c13223-5a00-11e9-b385-42010a80018d")),
        (K8S_SYSTEMD, JobRef(Scheduler.KUBERNETES, "1c178021-5860-4495-a1ab-f9ac17877672")),
        (K8S_GUARANTEED, JobRef(Scheduler.KUBERNETES, "0b7632a2-a56e-4278-987a-22de18008dbe")),
        (NOT_A_JOB, None),
        ("", None),
    ],
)
def test_job_from_cgroup_paths(text: str, expected: JobRef | None) -> None:
    assert job_from_cgroup(text) == expected


def test_job_from_environ_reads_slurm_job_id_and_ignores_the_rest() -> None:
    env = b"PATH=/usr/bin\0SLURM_JOB_ID=991\0SLURM_STEP_ID=0\0"
    assert job_from_environ(env) == JobRef(Scheduler.SLURM, "991")
    assert job_from_environ(b"SLURM_JOBID=12\0") == JobRef(Scheduler.SLURM, "12")
    assert job_from_environ(b"HOME=/root\0SLURM_JOB_ID=\0") is None


def _proc(root: Path, pid: int, *, environ: bytes | None, cgroup: str | None) -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "stat").write_text(
        f"{pid} (python3) S 1 {pid} {pid} 0 -1 4194560 " + "0 " * 14 + "777 0\n"
    )
    if environ is not None:
        (d / "environ").write_bytes(environ)
    if cgroup is not None:
        (d / "cgroup").write_text(cgroup)


def test_mapper_prefers_environ_then_falls_back_to_cgroup(tmp_path: Path) -> None:
    _proc(tmp_path, 10, environ=b"SLURM_JOB_ID=5\0", cgroup=SLURM_V2)
    _proc(tmp_path, 11, environ=b"HOME=/\0", cgroup=K8S_SYSTEMD)
    _proc(tmp_path, 12, environ=None, cgroup=SLURM_V1)
    _proc(tmp_path, 13, environ=b"", cgroup=NOT_A_JOB)
    mapper = ProcessJobMapper(tmp_path)
    assert mapper.job_for_pid(10) == JobRef(Scheduler.SLURM, "5")
    assert mapper.job_for_pid(11) == JobRef(
        Scheduler.KUBERNETES, "1c178021-5860-4495-a1ab-f9ac17877672"
    )
    assert mapper.job_for_pid(12) == JobRef(Scheduler.SLURM, "4243")
    assert mapper.job_for_pid(13) is None
    assert mapper.job_for_pid(99) is None  # exited already
    assert mapper.health.total_errors() == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_environ_is_counted_and_cgroup_still_used(tmp_path: Path) -> None:
    _proc(tmp_path, 20, environ=b"SLURM_JOB_ID=1\0", cgroup=SLURM_V2)
    (tmp_path / "20" / "environ").chmod(0)
    mapper = ProcessJobMapper(tmp_path)
    assert mapper.job_for_pid(20) == JobRef(Scheduler.SLURM, "4242")
    assert mapper.health.errors["environ permission denied"] == 1


def test_mapper_reads_our_own_real_proc_entry_without_error() -> None:
    mapper = ProcessJobMapper("/proc")
    mapper.job_for_pid(os.getpid())  # whatever this process is, reading it must not fail
    assert mapper.health.total_errors() == 0
