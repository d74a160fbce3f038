"""Emitter families of GPU clusters no rule covered before probe set eighteen (issue #11).

Formats, from each emitter's own source:
- apache/spark resource-managers/yarn/.../YarnAllocator.scala @39c81625d9: memLimitExceeded-
  LogMessage "Container killed by YARN for exceeding [physical ]memory limits. <diag> Consider
  boosting ..." (exit statuses -104 / -103); "Container marked as failed: <id> on host: <host>.
  Exit status: <n>. Diagnostics: <RM diagnostics>" for other statuses.
- apache/spark core/.../scheduler/TaskSchedulerImpl.scala @8320394b48 logExecutorLoss:
  "Lost executor <id> on <host>: <reason>", under log4j's "yy/MM/dd HH:mm:ss LEVEL Logger: ".
- apache/hadoop .../resourcemanager/scheduler/SchedulerUtils.java @bb8350388b LOST_CONTAINER
  "Container released on a *lost* node" (exit status -100); the NodeManager's
  ContainersMonitorImpl "Container [pid=P,containerID=C] is running beyond physical memory limits"
  (Hadoop 2) / "is running NB beyond the 'PHYSICAL' memory limit" (Hadoop 3).
- htcondor/htcondor src/condor_starter.V6.1/vanilla_proc.cpp @c458df5d5d "Job has gone over
  memory limit of N megabytes. Peak usage: N megabytes." / "Job has encountered an out-of-memory
  event."; docker_proc.cpp @32f02e0963 "Docker job has gone over memory limit of N Mb"; as the
  job event log's held event shows the hold reason ("Error from slot@host: ...", "Code 34").
- NVIDIA/pyxis pyxis_slurmstepd.c @a35027cf2f: "pyxis: container start failed with error code:
  N", "pyxis: couldn't start container", "pyxis: failed to import docker image", through
  slurmstepd's "error: " lines; SchedMD/slurm src/common/spank.c "spank: required plugin %s:
  %s() failed with rc=%d".
- flux-framework/flux-core src/common/libjob/job.c flux_job_waitstatus_to_exitcode: "task(s) %s"
  (strsignal), "task(s) exited with exit code %d", "job shell %s", as flux-job prints them;
  src/shell/oom.c @fa81b09cf9 "Memory cgroup out of memory: killed %lu task%s on %s."; src/shell/
  doom.c @ed7dc72628 "%s: %s rank %d on host %s exited and exit-timeout=%s has expired" ('shell'
  after shell.lost, else 'task'), behind the shell's "<t>s: flux-shell[<rank>]: FATAL: " prefix.

Verdicts by the label policy (tests/fixtures/corpus/README.md): a container killed for going over
the memory the job requested (YARN, HTCondor) is oom_host / job, on the host the line names; a
container released because YARN lost its node is node / node on that host; Spark's own "lost
executor" with a reason that names no cause is no verdict (unknown, no node); a container pyxis
could not import or start shows a failed step set-up on the node whose cause the line does not
settle (node / unknown, no node). Flux: a cgroup OOM kill the oom plugin logs is oom_host / job on
its host; task(s) killed or exited follow the signal rules; a lost job shell is node / unknown on
the host named; the first task's exit after exit-timeout is no verdict by itself.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

ALLOC = "apache/spark resource-managers/yarn/.../YarnAllocator.scala@39c81625d9"
TSI = "apache/spark core/.../scheduler/TaskSchedulerImpl.scala@8320394b48"
RM = "apache/hadoop .../resourcemanager/scheduler/SchedulerUtils.java@bb8350388b"
NM = "apache/hadoop .../nodemanager/containermanager/monitor/ContainersMonitorImpl.java"
CONDOR = "htcondor/htcondor src/condor_starter.V6.1/vanilla_proc.cpp@c458df5d5d"
CONDOR_DOCKER = "htcondor/htcondor src/condor_starter.V6.1/docker_proc.cpp@32f02e0963"
PYXIS = "NVIDIA/pyxis pyxis_slurmstepd.c@a35027cf2f"
SPANK = "SchedMD/slurm src/common/spank.c@284c3b95f0"
FLUX_JOB = "flux-framework/flux-core src/common/libjob/job.c"
FLUX_OOM = "flux-framework/flux-core src/shell/oom.c@fa81b09cf9"
FLUX_DOOM = "flux-framework/flux-core src/shell/doom.c@ed7dc72628"

OOM = ("oom_host", "job")
NODE = ("node", "node")
NODE_UNKNOWN = ("node", "unknown")
NONE = (None, "unknown")

# Spark's executors register by host name or IP, as YARN's NodeManagers do
SPARK_HOSTS = (*HOSTS[:6], "10.160.140.153", "ip-10-0-3-41.ec2.internal")
_LOG4J = ("{ts} ERROR {logger}: ", "{ts} WARN {logger}: ", "")
_SPARK = {
    "ts": ("24/01/02 10:11:12", "18/05/17 20:01:33"),
    "logger": ("TaskSchedulerImpl", "YarnScheduler", "YarnClusterScheduler", "YarnAllocator"),
    "n": (3, 35, 268),
}
_CID = ("container_1598507699008_0094_01_000010", "container_e46_1545125871120_21448_01_000282")

SPARK = [
    Fmt(
        "spark-lost-executor-yarn-memory",
        ALLOC,
        "Lost executor {n} on {host}: Container killed by YARN for exceeding {kind}memory limits."
        "  {used} GB of {lim} GB physical memory used. Consider boosting {conf}.\n",
        {
            **_SPARK,
            "host": SPARK_HOSTS,
            "kind": ("", "physical "),
            "used": ("40.6", "9.8"),
            "lim": ("40", "9.8"),
            "conf": ("spark.yarn.executor.memoryOverhead", "spark.executor.memoryOverhead"),
        },
        OOM,
        culprit="host",
        prefixes=_LOG4J,
    ),
    Fmt(
        "spark-executor-lost-failure-yarn-memory",
        ALLOC,
        "ExecutorLostFailure (executor {n} exited caused by one of the running tasks) Reason: "
        "Container killed by YARN for exceeding {kind}memory limits. {used} GB of {lim} GB "
        "physical memory used.\n",
        {**_SPARK, "kind": ("", "physical "), "used": ("22.0", "40.6"), "lim": ("19", "40")},
        OOM,
        prefixes=("", "{ts} WARN TaskSetManager: Lost task 110.0 in stage 68.0: "),
    ),
    Fmt(
        "yarn-container-lost-node",
        RM,
        "Container marked as failed: {cid} on host: {host}. Exit status: -100. Diagnostics: "
        "Container released on a *lost* node\n",
        {**_SPARK, "host": SPARK_HOSTS, "cid": _CID},
        NODE,
        culprit="host",
        prefixes=(
            "{ts} WARN YarnAllocator: ",
            "ExecutorLostFailure (executor {n} exited unrelated to the running tasks) Reason: ",
        ),
    ),
    Fmt(
        "yarn-nodemanager-beyond-memory",
        NM,
        "Container [pid={pid},containerID={cid}] is running {beyond} Current usage: 9.8 GB of "
        "9.8 GB physical memory used; 43.0 GB of 47.6 TB virtual memory used. Killing container."
        "\n",
        {
            "pid": (8788, 44545, 70947),
            "cid": _CID,
            "beyond": (
                "beyond physical memory limits.",
                "1723304448B beyond the 'PHYSICAL' memory limit.",
                "beyond virtual memory limits.",
                "1723304448B beyond the 'VIRTUAL' memory limit.",
            ),
        },
        OOM,
    ),
    Fmt(
        "spark-lost-executor-no-cause",
        TSI,
        "Lost executor {n} on {host}: {reason}\n",
        {
            **_SPARK,
            "host": SPARK_HOSTS,
            "reason": (
                "Remote RPC client disassociated. Likely due to containers exceeding thresholds, "
                "or network issues. Check driver logs for WARN messages.",
                "Executor heartbeat timed out after 130023 ms",
                "Executor Process Lost",
            ),
        },
        NONE,
        prefixes=_LOG4J,
    ),
]

_HELD = "012 ({cluster}.000.000) {date} Job was held.\n\t"
_CONDOR = {
    "cluster": (2456301, 15872426, 123),
    "date": ("2022-05-27 10:37:20", "03/03 15:13:48"),
    "slot": ("slot1_3", "slot1", "slot1_11"),
    "host": (*HOSTS[:5], "e327.chtc.wisc.edu"),
    "mb": (2048, 8055, 16384),
}
CONDOR_FMTS = [
    Fmt(
        "condor-held-over-memory",
        CONDOR,
        "Error from {slot}@{host}: Job has gone over memory limit of {mb} megabytes. Peak usage: "
        "{mb} megabytes.\n\tCode 34 Subcode 0\n",
        _CONDOR,
        OOM,
        culprit="host",
        prefixes=(_HELD, ""),
    ),
    Fmt(
        "condor-held-docker-over-memory",
        CONDOR_DOCKER,
        "Error from {slot}@{host}: Docker job has gone over memory limit of {mb} Mb\n"
        "\tCode 34 Subcode 0\n",
        _CONDOR,
        OOM,
        culprit="host",
        prefixes=(_HELD, "{cluster}.5184 erees           5/25 14:51 "),
    ),
    Fmt(
        "condor-oom-event",
        CONDOR,
        "Error from {slot}@{host}: Job has encountered an out-of-memory event.\n",
        _CONDOR,
        OOM,
        culprit="host",
        prefixes=(_HELD,),
    ),
]

_STEPD = ("slurmstepd: error: ", "{rank}: slurmstepd: error: ")
_PYXIS = {"rank": (0, 1, 7), "rc": (1, 2, 127)}
PYXIS_FMTS = [
    Fmt(
        "pyxis-container-start-failed",
        PYXIS,
        "pyxis: container start failed with error code: {rc}\n",
        _PYXIS,
        NODE_UNKNOWN,
        prefixes=_STEPD,
    ),
    Fmt(
        "pyxis-container-start-failed-with-log",
        PYXIS,
        "pyxis: container start failed with error code: {rc}\n"
        "{rank}: slurmstepd: error: pyxis: printing enroot log file:\n"
        "{rank}: slurmstepd: error: pyxis:     [ERROR] {hook} exited with return code {rc}\n"
        "{rank}: slurmstepd: error: pyxis: couldn't start container\n"
        "{rank}: slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed "
        "with rc=-1\n",
        {**_PYXIS, "hook": ("/etc/enroot/hooks.d/87-slurm.sh", "/etc/enroot/hooks.d/10-shm.sh")},
        NODE_UNKNOWN,
        prefixes=("{rank}: slurmstepd: error: ",),
    ),
    Fmt(
        "pyxis-import-failed",
        PYXIS,
        "pyxis: failed to import docker image\n",
        _PYXIS,
        NODE_UNKNOWN,
        prefixes=_STEPD,
    ),
    Fmt(
        "spank-required-plugin-failed",
        SPANK,
        "spank: required plugin {plugin}: {fn}() failed with rc=-1\n",
        {**_PYXIS, "plugin": ("spank_pyxis.so", "private-tmpdir.so"), "fn": ("task_init", "init")},
        NODE_UNKNOWN,
        prefixes=_STEPD,
    ),
]

_SHELL = ("{t}s: flux-shell[{srank}]: ERROR: oom: ",)
_FATAL = ("{t}s: flux-shell[0]: FATAL: ",)
_FLUX = {"t": ("230.432", "0.377", "1261.098"), "srank": (0, 1, 15), "rank": (3, 102)}
FLUX_FMTS = [
    Fmt(
        "flux-shell-cgroup-oom",
        FLUX_OOM,
        "Memory cgroup out of memory: killed {n} {tasks} on {host}.\n"
        "{t}s: flux-shell[{srank}]: ERROR: oom: memory.peak = 444.927G\n",
        {**_FLUX, "n": (1, 3), "tasks": ("task", "tasks"), "host": (*HOSTS, "flux-user000001")},
        OOM,
        culprit="host",
        prefixes=_SHELL,
    ),
    Fmt(
        "flux-job-tasks-killed",
        FLUX_JOB,
        "flux-job: task(s) Killed\n",
        _FLUX,
        ("oom_host", "unknown"),
        prefixes=(
            "",
            "{t}s: flux-shell[0]: FATAL: lmp: task rank {rank} on host gpu-a-07 exited "
            "and exit-timeout=30s has expired\n",
        ),
    ),
    Fmt(
        "flux-job-tasks-crashed",
        FLUX_JOB,
        "flux-job: task(s) {how}\n",
        {
            **_FLUX,
            "how": (
                "Segmentation fault",
                "Aborted",
                "exited with exit code 139",
                "exited with exit code 1",
            ),
        },
        ("user_code", "job"),
    ),
    Fmt(
        "flux-doom-lost-shell",
        FLUX_DOOM,
        "{arg0}: shell rank {rank} on host {host} exited and exit-timeout={fsd} has expired\n",
        {**_FLUX, "arg0": ("lmp", "python3"), "host": HOSTS, "fsd": ("30s", "1.5m")},
        NODE_UNKNOWN,
        culprit="host",
        prefixes=_FATAL,
    ),
    Fmt(
        "flux-doom-first-task-exit",
        FLUX_DOOM,
        "{what}rank {rank} on host {host} exited and exit-timeout={fsd} has expired\n",
        {**_FLUX, "what": ("doom: ", "lmp: task "), "host": HOSTS, "fsd": ("30s", "1.5m")},
        NONE,
        prefixes=_FATAL,
    ),
]

# Already read right before this probe set (pinned here, not new rules): Kueue's preemption of a
# workload (kubernetes-sigs/kueue pkg/scheduler/preemption/preemption.go @47689ed27d
# preemptionMessage) is a preemption, scheduler / infra; JobSet's failure condition
# (kubernetes-sigs/jobset pkg/constants/constants.go @81578ddc52 FailedJobsMessage,
# ReachedMaxRestartsMessage) names no cause, no verdict.
KUEUE = "kubernetes-sigs/kueue pkg/scheduler/preemption/preemption.go@47689ed27d"
JOBSET = "kubernetes-sigs/jobset pkg/constants/constants.go@81578ddc52"
K8S_PINNED = [
    Fmt(
        "kueue-preempted",
        KUEUE,
        "Preempted to accommodate a workload (UID: {uid}{juid}) due to {why}{paths}\n",
        {
            "uid": ("d34468c2-1ce5-47cd-a61d-689be78b6121", "2daed6fd-7c1e"),
            "juid": ("", ", JobUID: 5e63deb5-2f0a"),
            "why": (
                "prioritization in the ClusterQueue",
                "reclamation within the cohort",
                "Fair Sharing within the cohort",
            ),
            "paths": ("", "; preemptor path: /gpu/cq-high; preemptee path: /gpu/cq-low"),
        },
        ("scheduler", "infra"),
        prefixes=("", "  Normal   EvictedDueToPreempted  workload/job-a2-4764d  "),
    ),
    Fmt(
        "jobset-failed-no-cause",
        JOBSET,
        "jobset failed due to {why}\n",
        {
            "why": (
                "one or more job failures (first failed job: llama-workers-0)",
                "reaching max number of restarts",
            )
        },
        NONE,
        prefixes=("  Warning  FailedJobs  jobset/llama  ", "    Message: "),
    ),
]

FORMATS = [*SPARK, *CONDOR_FMTS, *PYXIS_FMTS, *FLUX_FMTS, *K8S_PINNED]


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_each_breadth_family_format_reads_as_its_emitter_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize(
    ("f", "text", "node"),
    params(SPARK[1:2] + SPARK[3:] + PYXIS_FMTS + FLUX_FMTS[1:3] + FLUX_FMTS[4:]),
)
def test_a_line_that_names_no_host_blames_none(f: Fmt, text: str, node: str | None) -> None:
    assert explain_text(text).node is None, text


BENIGN = (
    # Spark and YARN at work: a driver's own kill, a container given back, an allocation request
    "24/01/02 10:11:12 INFO TaskSchedulerImpl: Executor 3 on gpu-a-07 killed by driver.",
    "24/01/02 10:11:12 INFO YarnAllocator: Will request 8 executor container(s), each with 4 "
    "core(s) and 9011 MB memory (including 819 MB of overhead)",
    "24/01/02 10:11:12 INFO YarnAllocator: Completed container "
    "container_1598507699008_0094_01_000010 on host: node0123 (state: COMPLETE, exit status: 0)",
    # HTCondor's own event log: a memory-usage update and a release are no failure
    "006 (2456301.000.000) 2022-05-27 10:13:57 Image size of job updated: 8034\n"
    "\t8034  -  MemoryUsage of job (MB)\n\t8227760  -  ResidentSetSize of job (KB)",
    "013 (2456301.000.000) 2022-05-27 10:37:21 Job was released.",
    # pyxis's progress lines
    "slurmstepd: pyxis: importing docker image: nvcr.io#nvidia/pytorch:24.01-py3",
    "slurmstepd: pyxis: imported docker image: nvcr.io#nvidia/pytorch:24.01-py3",
    "slurmstepd: pyxis: creating container filesystem: pyxis_123.0",
    # Flux's shell at work: its oom plugin's own debug line, a task exit the doom plugin notes
    "0.056s: flux-shell[0]: DEBUG: oom: monitoring /sys/fs/cgroup/user.slice/memory.events",
    "0.085s: flux-shell[0]: exit-monitor: task 0 exited with code 0",
)


@pytest.mark.parametrize("text", BENIGN)
def test_a_benign_line_of_these_emitters_is_no_failure(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), got.explanation
