"""Slurm job states, exit codes and reasons as sacct, squeue and scontrol print them.

Formats from SchedMD/slurm @ SLURM_COMMIT: the job states of slurm_protocol_defs.c
job_state_string (BOOT_FAIL, CANCELLED, COMPLETED, DEADLINE, FAILED, NODE_FAIL, OUT_OF_MEMORY,
PREEMPTED, TIMEOUT, REQUEUED; sacct adds "CANCELLED by <uid>" and cuts a value longer than its
column with a last "+", print_fields.c), sacct's ExitCode "%d:%d" = <exit status>:<signal>
(sacct/print.c: WEXITSTATUS or WTERMSIG; OUT_OF_MEMORY jobs show 0:125), in the default table
(header, dashes, fixed-width rows) and --parsable2 ("|"-separated); scontrol/info_job.c's
"JobState=%s Reason=%s [FailedNode=%s] Dependency=%s" then "... ExitCode=%u:%u" (state_desc with
its white space replaced by "_"); squeue's default "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R"
with the reason in parentheses; job_state_reason.c's reason strings.
"""

from __future__ import annotations

import pytest

from tests.correlator.emitter_probe import HOSTS, SLURM_COMMIT, Fmt, check, params

_AT = f"@{SLURM_COMMIT[:10]}"
_STATES = f"SchedMD/slurm src/common/slurm_protocol_defs.c job_state_string{_AT}"
_SCONTROL = f"SchedMD/slurm src/scontrol/info_job.c{_AT}"
_SQUEUE = f"SchedMD/slurm src/squeue/opts.c + src/common/job_state_reason.c{_AT}"
USER, HOOM_JOB, HOOM_UNK = ("user_code", "job"), ("oom_host", "job"), ("oom_host", "unknown")
NODE, SCHED_JOB, SCHED_INFRA = ("node", "node"), ("scheduler", "job"), ("scheduler", "infra")
NOTHING, STOP = (None, "unknown"), (None, "unknown")
_JOBS = ("4711", "123456", "98765_3", "555+0", "20331")
_NAMES = ("train", "llama-70b", "bash", "sbatch", "python3")
_ACCTS = ("ml-team", "root", "proj_a1", "default")

# sacct's default table: JobID(12) JobName(10) Partition(10) Account(10) AllocCPUS(10)
# State(10) ExitCode(8), right-aligned (print_fields.c)
_TABLE = (
    "       JobID    JobName  Partition    Account  AllocCPUS      State ExitCode \n"
    "------------ ---------- ---------- ---------- ---------- ---------- -------- \n"
    "{job:>12} {name:>10} {part:>10} {acct:>10} {cpus:>10} {cell:>10} {exit:>8} \n"
    "{job:>12.6}.batch {batch:>10} {empty:>10} {acct:>10} {cpus:>10} {cell:>10} {exit:>8} \n"
)
_PARSABLE = (
    "JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode|NodeList\n"
    "{job}|{name}|{part}|{acct}|{cpus}|{state}|{exit}|{host}\n"
)


def _cell(state: str) -> str:
    """The State cell of the default table: cut to 10 with a last '+' (print_fields_str)."""
    return state if len(state) <= 10 else state[:9] + "+"


def _sacct(key: str, states: tuple[str, ...], exits: tuple[str, ...], want: tuple) -> list[Fmt]:
    """The state(s) with their exit codes in sacct's default table and in --parsable2."""
    common = {
        "job": _JOBS,
        "name": _NAMES,
        "part": ("gpu", "batch", "h100"),
        "acct": _ACCTS,
        "cpus": (64, 8, 128),
        "exit": exits,
        "host": HOSTS,
    }
    table = Fmt(
        f"sacct-table-{key}",
        f"SchedMD/slurm src/sacct/print.c + src/common/print_fields.c{_AT}",
        _TABLE,
        {**common, "cell": tuple(_cell(s) for s in states), "batch": ("batch",), "empty": ("",)},
        want,
    )
    parsable = Fmt(
        f"sacct-P-{key}",
        f"SchedMD/slurm src/sacct/print.c{_AT}",
        _PARSABLE,
        {**common, "state": states},
        want,
    )
    return [table, parsable]


# (key, states, exit codes, verdict): sacct.html's state meanings and slurm.json/signals.py's
SACCT = [
    *_sacct("failed-exit", ("FAILED",), ("1:0", "2:0", "127:0", "255:0", "42:0"), USER),
    *_sacct("failed-sigkill", ("FAILED",), ("0:9", "137:0"), HOOM_UNK),
    *_sacct("failed-crash", ("FAILED",), ("0:11", "0:6", "139:0", "134:0", "0:8", "0:4"), USER),
    *_sacct("failed-sigterm", ("FAILED",), ("0:15", "143:0", "0:2", "130:0"), STOP),
    *_sacct("node-fail", ("NODE_FAIL",), ("0:0", "1:0"), NODE),
    *_sacct("boot-fail", ("BOOT_FAIL",), ("0:0",), NODE),
    *_sacct("oom", ("OUT_OF_MEMORY",), ("0:125", "0:0"), HOOM_JOB),
    *_sacct("timeout", ("TIMEOUT",), ("0:0", "0:15", "0:9"), SCHED_JOB),
    *_sacct(
        "cancelled",
        ("CANCELLED", "CANCELLED by 1000", "CANCELLED by 0"),
        ("0:0", "0:15", "0:9"),
        SCHED_JOB,
    ),
    *_sacct("preempted", ("PREEMPTED",), ("0:0", "0:15"), SCHED_INFRA),
    *_sacct("deadline", ("DEADLINE",), ("0:0",), SCHED_JOB),
    *_sacct("requeued", ("REQUEUED",), ("0:0",), SCHED_INFRA),
    *_sacct("completed", ("COMPLETED",), ("0:0",), NOTHING),
]

# scontrol show job's lines 1, 4 and 5 (the rest omitted); state_desc's spaces become '_'
_SHOW = (
    "JobId={job} JobName={name}\n"
    "   JobState={state} Reason={reason} {failed}Dependency=(null)\n"
    "   Requeue=1 Restarts={restarts} BatchFlag=1 Reboot=0 ExitCode={exit}\n"
)


def _show(
    key: str,
    state: str,
    reasons: tuple[str, ...],
    exits: tuple[str, ...],
    want: tuple,
    failed: tuple[str, ...] = ("",),
) -> Fmt:
    return Fmt(
        f"scontrol-{key}",
        _SCONTROL,
        _SHOW,
        {
            "job": _JOBS,
            "name": _NAMES,
            "state": (state,),
            "reason": reasons,
            "exit": exits,
            "restarts": (0, 1, 3),
            "failed": failed,
        },
        want,
    )


SCONTROL = [
    _show("nonzero", "FAILED", ("NonZeroExitCode",), ("1:0", "2:0", "255:0"), USER),
    _show(
        "raised-kill", "FAILED", ("RaisedSignal:9(Killed)", "RaisedSignal:9"), ("0:9",), HOOM_UNK
    ),
    _show(
        "raised-crash",
        "FAILED",
        ("RaisedSignal:11(Segmentation_fault)", "RaisedSignal:6"),
        ("0:11", "0:6"),
        USER,
    ),
    _show(
        "node-down",
        "NODE_FAIL",
        ("NodeDown",),
        ("0:0",),
        NODE,
        failed=(*(f"FailedNode={h} " for h in HOSTS[:3]), ""),
    ),
    _show(
        "launch-failure",
        "FAILED",
        ("JobLaunchFailure", "SystemFailure"),
        ("0:0", "1:0"),
        ("node", "unknown"),
    ),
    _show("time-limit", "TIMEOUT", ("TimeLimit", "InactiveLimit"), ("0:0", "0:15"), SCHED_JOB),
    _show("oom", "OUT_OF_MEMORY", ("OutOfMemory",), ("0:125",), HOOM_JOB),
    _show("deadline", "DEADLINE", ("DeadLine",), ("0:0",), SCHED_JOB),
    _show("bad-constraints", "PENDING", ("BadConstraints",), ("0:0",), SCHED_JOB),
    _show("held-launch", "PENDING", ("launch_failed_requeued_held",), ("0:0",), NODE),
    _show("held-admin", "PENDING", ("JobHeldAdmin",), ("0:0",), NODE),
    _show(
        "req-node",
        "PENDING",
        (
            "ReqNodeNotAvail,_UnavailableNodes:gpu-a-[01-02]",
            "ReqNodeNotAvail,_Reserved_for_maintenance",
        ),
        ("0:0",),
        SCHED_INFRA,
    ),
    _show("requeued", "REQUEUED", ("None", "BeginTime"), ("0:0",), SCHED_INFRA),
]

_SQ = (
    "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
    "{job:>18} {part:>9} {name:>8.8} {user:>8.8} {st:>2} {time:>10} {nodes:>6} ({reason})\n"
)


def _squeue(key: str, reasons: tuple[str, ...], want: tuple) -> Fmt:
    return Fmt(
        f"squeue-{key}",
        _SQUEUE,
        _SQ,
        {
            "job": _JOBS,
            "part": ("gpu", "h100"),
            "name": _NAMES,
            "user": ("alice", "svc-ml"),
            "st": ("PD",),
            "time": ("0:00",),
            "nodes": (1, 4, 16),
            "reason": reasons,
        },
        want,
    )


SQUEUE = [
    _squeue("held-launch", ("launch failed requeued held",), NODE),
    _squeue("held-admin", ("JobHeldAdmin",), NODE),
    _squeue("bad-constraints", ("BadConstraints",), SCHED_JOB),
    _squeue(
        "req-node",
        ("ReqNodeNotAvail, UnavailableNodes:gpu-a-07", "ReqNodeNotAvail, Reserved for maintenance"),
        SCHED_INFRA,
    ),
    _squeue("node-down", ("NodeDown",), NODE),
]

FORMATS = SACCT + SCONTROL + SQUEUE


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_slurm_job_record_reads_as_its_state_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
