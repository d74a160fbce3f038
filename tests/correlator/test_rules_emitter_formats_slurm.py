"""Slurm's slurmstepd / srun / slurmctld formats against the explain rules.

Formats from SchedMD/slurm @ SLURM_COMMIT: slurmstepd req.c's "*** %s ON %s CANCELLED AT %s DUE
TO ... ***" (entity "JOB %u" or "STEP %s", time from slurm_make_time_str), srun launch.c's
"%s: %s %s: %s%s" (a hostlist, "task"/"tasks", a task range, strsignal's text or "Exited with
exit code %d" or "Out Of Memory"), task_cgroup_memory.c's oom_kill count, slurmctld's
ping_nodes.c / job_mgr.c node-failure lines (%pJ is "JobId=%u", a ranged hostlist when several
nodes) and step_launch.c's "Node failure on %s".
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, SLURM_COMMIT, Fmt, check, params

_AT = f"@{SLURM_COMMIT[:10]}"
_STEPD = f"SchedMD/slurm src/slurmd/slurmstepd/req.c{_AT}"
_SRUN = f"SchedMD/slurm src/srun/launch.c{_AT}"
_ENTITY = ("JOB 4711", "STEP 123456.0", "STEP 98765_3.2", "JOB 12", "STEP 555+1.0")
_WHEN = ("2026-03-12T08:14:02", "2025-12-31T23:59:59")
_STAMP = ("slurmstepd: error: ", "[2026-03-12T08:14:02.511] error: ", "error: ")
# srun's host list (hostlist ranged string) and task list, one or several
_TASK_HOSTS = ("gpu-a-07", "node0123", "gpu-a-[01-02]", "dgx-h100-031,dgx-h100-034", "nid[001234]")
_TASKS = (("task", "0"), ("tasks", "0-7"), ("tasks", "3,11"), ("task", "63"))


def _stepd(key: str, tail: str, want: tuple[str | None, str]) -> Fmt:
    return Fmt(
        f"stepd-{key}",
        _STEPD,
        "*** {entity} ON {host} CANCELLED AT {when} " + tail + " ***\n",
        {"entity": _ENTITY, "host": HOSTS, "when": _WHEN},
        want,
        prefixes=_STAMP,
    )


STEPD = [
    _stepd("time-limit", "DUE TO TIME LIMIT", ("scheduler", "job")),
    _stepd("preempted", "DUE TO PREEMPTION", ("scheduler", "infra")),
    _stepd("node-fail", "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS", ("node", "node")),
    _stepd("requeue", "DUE TO JOB REQUEUE", ("scheduler", "infra")),
    _stepd("task-failure", "DUE TO TASK FAILURE", (None, "unknown")),
    # scancel: SIGTERM or SIGKILL, printed with strsignal
    Fmt(
        "stepd-cancelled",
        _STEPD,
        "*** {entity} ON {host} CANCELLED AT {when} DUE to SIGNAL {sig} ***\n",
        {"entity": _ENTITY, "host": HOSTS, "when": _WHEN, "sig": ("Terminated", "Killed")},
        ("scheduler", "job"),
        prefixes=_STAMP,
    ),
    Fmt(
        "stepd-oom-kill",
        f"SchedMD/slurm src/plugins/task/cgroup/task_cgroup_memory.c{_AT}",
        "Detected {n} in StepId={step}. Some of the step tasks have been OOM Killed.\n",
        {
            "n": ("1 oom_kill event", "3 oom_kill events", "12 oom_kill events"),
            "step": ("4711.batch", "123456.0", "98765.extern"),
        },
        ("oom_host", "job"),
        prefixes=_STAMP,
    ),
]


def _srun(key: str, what: tuple[str, ...], want: tuple[str | None, str]) -> Fmt:
    return Fmt(
        f"srun-{key}",
        _SRUN,
        "srun: error: {hosts}: {task}: {what}\n",
        {"hosts": _TASK_HOSTS, "task": tuple(f"{t} {n}" for t, n in _TASKS), "what": what},
        want,
    )


SRUN = [
    _srun("killed", ("Killed",), ("oom_host", "unknown")),
    _srun(
        "crash",
        (
            "Segmentation fault",
            "Segmentation fault (core dumped)",
            "Aborted",
            "Aborted (core dumped)",
            "Floating point exception",
            "Illegal instruction",
        ),
        ("user_code", "job"),
    ),
    _srun("bus", ("Bus error", "Bus error (core dumped)"), ("oom_host", "unknown")),
    _srun(
        "exit",
        ("Exited with exit code 1", "Exited with exit code 2", "Exited with exit code 255"),
        ("user_code", "job"),
    ),
    _srun("oom", ("Out Of Memory",), ("oom_host", "job")),
]

CTLD = [
    Fmt(
        "ctld-not-responding",
        f"SchedMD/slurm src/slurmctld/ping_nodes.c{_AT}",
        "error: Nodes {host} not responding, setting DOWN\n",
        {"host": HOSTS},
        ("node", "node"),
        "host",
    ),
    Fmt(
        "ctld-requeue-failed-node",
        f"SchedMD/slurm src/slurmctld/job_mgr.c{_AT}",
        "{verb} JobId={job} {how} {host}\n",
        {
            "verb": ("requeue job", "Killing"),
            "job": (4711, 123456),
            "how": ("due to failure of node", "on failed node"),
            "host": HOSTS,
        },
        ("node", "node"),
        "host",
    ),
    Fmt(
        "step-node-failure",
        f"SchedMD/slurm src/api/step_launch.c{_AT}",
        "srun: error: Node failure on {host}\n",
        {"host": HOSTS},
        ("node", "node"),
        "host",
    ),
]

FORMATS = STEPD + SRUN + CTLD


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_slurm_line_reads_as_its_family_documents(fmt: Fmt, text: str, node: str | None) -> None:
    check(fmt, text, node)


@pytest.mark.parametrize(
    ("hosts", "node"),
    [("gpu-a-07", "gpu-a-07"), ("gpu-a-[01-02]", None), ("gpu-a-01,gpu-a-07", None)],
)
def test_srun_names_the_node_of_its_tasks_only_when_the_hostlist_is_one_host(
    hosts: str, node: str | None
) -> None:
    # launch.c prints one hostlist for every task that ended alike: a range blames no one node
    got = explain_text(f"srun: error: {hosts}: tasks 0-7: Out Of Memory\n")
    assert (got.category, got.blame, got.node) == ("oom_host", "job", node)


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


_NODE_FAILURE = (
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
    + "slurmstepd: error: "
    + "*** STEP 4242.0 ON gpu-a-03 CANCELLED AT 2021-03-02T10:11:12 DUE TO NODE FAILURE, "
    "SEE SLURMCTLD LOG FOR DETAILS ***\n"
)


def test_a_step_cancelled_for_a_node_failure_blames_a_node_but_not_the_one_it_names() -> None:
    # SchedMD/slurm src/slurmd/slurmstepd/req.c (_handle_signal_container, SIG_NODE_FAIL) puts
    # its own node (job->node_name) after ON; slurmctld (src/slurmctld/job_mgr.c
    # kill_running_job_by_node_name: "Killing %pJ on failed node %s", then deallocate_nodes)
    # signals the step's nodes that still answer, so gpu-a-03 survived: a node failed, not it
    assert _verdict(_NODE_FAILURE) == ("node", "node", None)


@pytest.mark.parametrize(
    "ctld",
    [
        # job_mgr.c kill_running_job_by_node_name, %pJ printing "JobId=%u"
        "[2021-03-02T10:11:10.123] Killing JobId=4242 on failed node gpu-a-04",
        # ping_nodes.c: error("Nodes %s not responding, setting DOWN", host_str)
        "[2021-03-02T10:11:10.123] error: Nodes gpu-a-04 not responding, setting DOWN",
    ],
)
def test_a_node_failure_cancel_takes_its_culprit_from_the_line_naming_the_failed_node(
    ctld: str,
) -> None:
    assert _verdict(ctld + "\n" + _NODE_FAILURE) == ("node", "node", "gpu-a-04")
    assert _verdict(_NODE_FAILURE + ctld + "\n") == ("node", "node", "gpu-a-04")
