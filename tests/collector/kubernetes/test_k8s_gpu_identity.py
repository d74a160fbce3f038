"""A pod the Kubernetes source sees and the GPU the node agent saw its process on join in the
store: the agent knows the pod only by its UID (cgroup path), the source by namespace/name."""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlalchemy.orm import Session

from collector.base import Observations
from collector.fakenvml import FakeNvml
from collector.kubernetes import KubernetesSource
from collector.nvml import NvmlSource
from collector.procs import ProcessJobMapper
from timeline import queries, service
from timeline.models import Batch, Scheduler

POD_UID = "6f1c2d9e-3b1a-4c55-9d0e-2f7a1b8c4e10"  # pod_gpu_running.json: ml-research/train-llama-0
STARTED = 1_731_839_402.0  # its status.startTime, 2024-11-17T10:30:02Z
# A containerd pod under the systemd cgroup driver, as in tests/collector/test_procs.py.
CGROUP = (
    "0::/kubepods.slice/kubepods-pod{uid}.slice/"
    "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n"
)


def _store(session: Session, obs: Observations, *, node: str) -> None:
    batch = Batch(
        agent=f"test@{node}",
        node=node,
        batch_id=uuid.uuid4().hex,
        events=obs.events,
        jobs=obs.jobs,
        allocations=obs.allocations,
        nodes=obs.nodes,
    )
    service.append_batch(session, batch=batch)
    session.commit()


def _agent_sees_pod_on_gpu(tmp_path: Path, gpu: int) -> Observations:
    """What NvmlSource reports when a process of the pod runs on GPU `gpu` of gpu-node-07."""
    pid_dir = tmp_path / "4242"
    pid_dir.mkdir(exist_ok=True)
    (pid_dir / "environ").write_bytes(b"HOME=/root\0NVIDIA_VISIBLE_DEVICES=all\0")
    (pid_dir / "cgroup").write_text(CGROUP.format(uid=POD_UID.replace("-", "_")))
    fake = FakeNvml(gpus=4)
    src = NvmlSource(
        fake,
        node="gpu-node-07",
        clock=lambda: STARTED + 60.0,
        proc_mapper=ProcessJobMapper(tmp_path),
    )
    fake.set_processes(gpu, [(4242, 40 * 1024**3)])
    obs = src.collect()
    (alloc,) = obs.allocations
    assert (alloc.scheduler, alloc.job_id) == (Scheduler.KUBERNETES, POD_UID)
    return Observations(allocations=obs.allocations)


def _holders(session: Session, gpu: int) -> list[str]:
    rows = queries.jobs_holding_gpu(session, node="gpu-node-07", gpu_index=gpu, at=STARTED + 120.0)
    return sorted(r["job_id"] for r in rows)


def _gpu_rows(session: Session) -> list[tuple[str, int, str | None]]:
    rows = queries.current_allocations(session, at=STARTED + 120.0)
    return sorted((r["job_id"], r["gpu_index"], r["name"]) for r in rows if r["gpu_index"] >= 0)


def _pod_only(obs: Observations) -> Observations:
    """The source's pod without its node-wide allocation, which would match every GPU of the
    node and hide whether the agent's GPU-level row joined."""
    return Observations(jobs=obs.jobs)


def test_converter_keeps_the_pod_uid(source: KubernetesSource) -> None:
    jobs = {j.job_id: j for j in source.collect().jobs}
    assert jobs["ml-research/train-llama-0"].payload["uid"] == POD_UID


def test_agent_gpu_allocation_after_the_pod_is_known_joins_the_pod(
    source: KubernetesSource, session: Session, tmp_path: Path
) -> None:
    _store(session, _pod_only(source.collect()), node="server:kubernetes")
    _store(session, _agent_sees_pod_on_gpu(tmp_path, gpu=3), node="gpu-node-07")
    assert _holders(session, 3) == ["ml-research/train-llama-0"]
    assert _holders(session, 1) == []  # GPU-level: the pod holds GPU 3, not GPU 1


def test_agent_gpu_allocation_before_the_pod_is_known_joins_when_it_arrives(
    source: KubernetesSource, session: Session, tmp_path: Path
) -> None:
    _store(session, _agent_sees_pod_on_gpu(tmp_path, gpu=2), node="gpu-node-07")
    assert _holders(session, 2) == []  # a bare UID names no job yet
    _store(session, _pod_only(source.collect()), node="server:kubernetes")
    assert _holders(session, 2) == ["ml-research/train-llama-0"]


def test_full_source_output_and_agent_repeat_keep_one_gpu_row_under_the_pod(
    source: KubernetesSource, session: Session, tmp_path: Path
) -> None:
    _store(session, _agent_sees_pod_on_gpu(tmp_path, gpu=2), node="gpu-node-07")
    _store(session, source.collect(), node="server:kubernetes")
    # The agent repeating the allocation under the UID lands on the same row, not a new one.
    _store(session, _agent_sees_pod_on_gpu(tmp_path, gpu=2), node="gpu-node-07")
    assert _gpu_rows(session) == [("ml-research/train-llama-0", 2, "train-llama-0")]
    assert _holders(session, 2) == ["ml-research/train-llama-0"]


def test_unknown_uids_and_pod_names_are_not_resolved(session: Session) -> None:
    aliases = service.resolve_job_alias(
        session, scheduler=Scheduler.KUBERNETES, job_ids=[POD_UID, "ns/pod"]
    )
    assert aliases == {}


def test_a_known_pod_resolves_by_its_uid_for_kubernetes_only(
    source: KubernetesSource, session: Session
) -> None:
    _store(session, source.collect(), node="server:kubernetes")
    resolve = service.resolve_job_alias
    k8s = resolve(session, scheduler=Scheduler.KUBERNETES, job_ids=[POD_UID])
    assert k8s == {POD_UID: "ml-research/train-llama-0"}
    assert resolve(session, scheduler=Scheduler.SLURM, job_ids=[POD_UID]) == {}
