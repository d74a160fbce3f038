"""Probe set thirty: NCCL's RAS client reports, and Slurm's QOS / association limit reasons.

NCCL: src/ras/client_support.cc @5067397c2676 (NCCL_COMMIT): the Errors and Warnings sections
name each outlier rank with its node, "  Rank %d -- GPU %s managed by process %d on node %s"
(INCOMPLETE), "  Rank %d has status %s -- GPU %s managed by process %d on node %s" (MISMATCH),
"  Rank %d reported %s -- GPU %s managed by process %d on node %s" (ERROR, ncclErrorToString),
rasGpuToString "%d" plus " (NVML %d)"; the node named is the culprit, not the host that ran
ncclras, except for a rank that reported a Remote process error (a victim).

Slurm: src/common/job_state_reason.c @284c3b95f08a (SLURM_COMMIT): the limit reasons (flag
JSR_QOS_ASSOC, the QOSGrp* group limits) a pending job is held by, as scontrol (Reason=...) and
squeue's NODELIST(REASON) column ("(...)") print them. A per-job maximum or minimum (the job
cannot start as asked) is scheduler/job, never the hardware; a group, per-user or per-account
cap only makes the job wait its turn and, like Priority or Resources, is no failure (as
test_rules_emitters_round6_jobs pinned before). Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, NCCL_COMMIT, SLURM_COMMIT, Fmt, check, params

RAS = f"NVIDIA/nccl src/ras/client_support.cc@{NCCL_COMMIT[:10]}"
REASONS = f"SchedMD/slurm src/common/job_state_reason.c@{SLURM_COMMIT[:10]}"
# ncclSocketToHost: the node's name, or its address when the name does not resolve
RAS_NODES = (*HOSTS, "10.4.0.17", "2001:db8:12::17")
_GPU = {"gpu": ("5", "0 (NVML 7)", "3 (NVML 3)"), "pid": (40123, 7711), "r": (13, 0, 255)}
# the section header the rank lines sit under
_COMM = ("#0-0 (27a079b828ff1a75) {sec}\n  {head}\n",)

RAS_FORMATS = (
    Fmt(
        "ras-incomplete-rank",
        RAS,
        "  Rank {r} -- GPU {gpu} managed by process {pid} on node {host}\n",
        {
            **_GPU,
            "host": RAS_NODES,
            "sec": ("INCOMPLETE",),
            "head": ("Missing communicator data from 1 rank",),
        },
        ("nccl_timeout_unknown", "unknown"),
        culprit="host",
        prefixes=_COMM,
    ),
    Fmt(
        "ras-mismatch-rank",
        RAS,
        "  {n} ranks have status RUNNING\n  Rank {r} has status {st} -- GPU {gpu} managed by "
        "process {pid} on node {host}\n",
        {
            **_GPU,
            "host": RAS_NODES,
            "n": (15, 7),
            "st": ("INIT", "FINALIZE", "ABORT"),
            "sec": ("MISMATCH",),
            "head": ("Communicator ranks have different status",),
        },
        ("nccl_timeout_unknown", "unknown"),
        culprit="host",
        prefixes=_COMM,
    ),
    Fmt(
        "ras-operation-count-rank",
        RAS,
        "  {n} ranks have launched up to operation 1824\n  Rank {r} {has} -- GPU {gpu} managed "
        "by process {pid} on node {host}\n",
        {
            **_GPU,
            "host": RAS_NODES,
            "n": (15, 7),
            "has": ("has launched up to operation 1823", "has not launched any operations"),
            "sec": ("MISMATCH",),
            "head": ("Communicator ranks have different AllReduce operation counts",),
        },
        ("nccl_timeout_unknown", "unknown"),
        culprit="host",
        prefixes=_COMM,
    ),
    Fmt(
        "ras-rank-system-error",
        RAS,
        "  Rank {r} reported {err} -- GPU {gpu} managed by process {pid} on node {host}\n",
        {
            **_GPU,
            "host": RAS_NODES,
            "err": ("System error", "Internal error"),
            "sec": ("ERROR",),
            "head": ("Asynchronous error on 1 rank", "Initialization error on 1 rank"),
        },
        ("interconnect", "unknown"),
        culprit="host",
        prefixes=_COMM,
    ),
    Fmt(
        "ras-rank-cuda-or-usage-error",
        RAS,
        "  Rank {r} reported {err} -- GPU {gpu} managed by process {pid} on node {host}\n",
        {
            **_GPU,
            "host": RAS_NODES,
            "err": ("Unhandled CUDA error", "Invalid argument", "Invalid usage"),
            "sec": ("ERROR",),
            "head": ("Asynchronous error on 1 rank",),
        },
        ("user_code", "job"),
        culprit="host",
        prefixes=_COMM,
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(RAS_FORMATS))
def test_an_ncclras_rank_line_blames_the_node_it_names(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


def test_a_rank_that_lost_its_remote_peer_is_not_blamed() -> None:
    text = (
        "#0-0 (27a079b828ff1a75) ERROR\n  Asynchronous error on 1 rank\n  Rank 13 reported "
        "Remote process error -- GPU 5 managed by process 40123 on node gpu-a-07\n"
    )
    got = explain_text(text)
    assert (got.category, got.node) == ("interconnect", None), got.explanation


def test_the_ras_query_timeout_names_no_node() -> None:
    text = "TIMEOUT\n  Encountered 2 communication timeouts while gathering communicator data\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("nccl_timeout_unknown", "unknown", None)


# a per-job maximum or minimum of the QOS or association: the job cannot start as asked
LIMITS = (
    "QOSMaxGRESPerJob",
    "QOSMaxWallDurationPerJobLimit",
    "QOSMaxNodePerJobLimit",
    "QOSMaxCpuPerJobLimit",
    "QOSMaxMemoryPerJob",
    "QOSMinGRES",
    "QOSMinCpuNotSatisfied",
    "AssocMaxGRESPerJob",
    "AssocMaxNodePerJobLimit",
    "AssocMaxWallDurationPerJobLimit",
)
# a group, per-user or per-account cap: the job waits its turn, nothing failed
WAITS = (
    "QOSMaxGRESPerUser",
    "QOSGrpGRES",
    "QOSGrpGRESMinutes",
    "QOSMaxJobsPerUserLimit",
    "QOSJobLimit",
    "QOSResourceLimit",
    "QOSUsageThreshold",
    "AssocGrpGRES",
    "AssocGrpGRESRunMinutes",
    "AssocMaxJobsLimit",
    "AssocGrpCPUMinutesLimit",
    "AssociationJobLimit",
    "AssociationResourceLimit",
    "MaxGRESPerAccount",
    "MaxGRESRunMinsPerUser",
)

SLURM_FORMATS = (
    Fmt(
        "scontrol-pending-limit",
        REASONS,
        "JobId={id} JobName=train UserId=bob(1000) GroupId=bob(1000)\n   Priority=4294 "
        "Nice=0 Account=ml QOS={qos}\n   JobState=PENDING Reason={reason} Dependency=(null)\n",
        {"id": (123456, 77), "qos": ("normal", "gpu-high"), "reason": LIMITS},
        ("scheduler", "job"),
    ),
    Fmt(
        "squeue-pending-limit",
        REASONS,
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        "            {id}       gpu    train      bob PD       0:00      {n} ({reason})\n",
        {"id": (123456, 77), "n": (4, 1), "reason": LIMITS},
        ("scheduler", "job"),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(SLURM_FORMATS))
def test_a_job_past_a_per_job_qos_or_association_limit_is_the_jobs_request(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize(
    "reason", ["Priority", "Resources", "Dependency", "BeginTime", "None", *WAITS]
)
def test_a_job_waiting_its_turn_or_under_a_group_cap_is_no_failure(reason: str) -> None:
    text = (
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        f"            123456       gpu    train      bob PD       0:00      4 ({reason})\n"
    )
    assert explain_text(text).category is None


def test_a_node_failure_beside_a_pending_limit_still_decides() -> None:
    text = (
        "            123457       gpu    train      bob PD       0:00      4 (QOSMaxGRESPerUser)\n"
        "[2025-03-04T10:12:01.123] Killing JobId=123456 on failed node gpu-a-07\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-a-07"), got.explanation
