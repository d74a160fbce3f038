"""Slurm's `Requested node configuration is not available` is the job's own unmeetable request.

SchedMD/slurm src/common/slurm_errno.c gives ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE this text;
src/stepmgr/stepmgr.c _pick_step_nodes() returns it for a step request that can never be met in
its allocation (a node list outside it, an invalid list, too many nodes), and ESLURM_NODES_BUSY
for resources only in use now. So it reads scheduler/job, not a full cluster (scheduler/infra).
"""

from __future__ import annotations

from correlator.explain import explain_bytes


def _verdict(text: str) -> tuple[str | None, str | None, str | None]:
    got = explain_bytes(text.encode())
    return got.category, got.blame, got.node


def test_a_step_whose_node_list_its_allocation_cannot_give_is_the_jobs_request() -> None:
    text = (
        "srun --nodes=1 --ntasks=1 --nodelist=gpu017 /bin/hostname\n"
        "srun: error: Unable to create step for job 4412: "
        "Requested node configuration is not available\n"
    )
    assert _verdict(text) == ("scheduler", "job", None)


def test_a_job_submission_no_node_can_ever_satisfy_is_the_jobs_request() -> None:
    text = (
        "sbatch: error: Batch job submission failed: "
        "Requested node configuration is not available\n"
    )
    assert _verdict(text) == ("scheduler", "job", None)


def test_a_pod_the_cluster_has_no_room_for_stays_the_infrastructures() -> None:
    text = (
        "Warning  FailedScheduling  12s  default-scheduler  0/4 nodes are available: "
        "4 Insufficient nvidia.com/gpu.\n"
    )
    assert _verdict(text)[:2] == ("scheduler", "infra")
