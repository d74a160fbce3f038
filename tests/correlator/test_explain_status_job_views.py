"""Probe set twenty, job views: a job's status view names the one node the job ran on, none
over a node range or a host column that may have cut the name, and a healthy view pasted beside a
fault that names no host is not that fault's host (formats cited beside each group and in
tests/correlator/status_views.py; labels follow the corpus policy)."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.status_views import (
    HOSTS,
    NODE,
    OK,
    bhosts,
    bhosts_l,
    pbsnodes_a,
    pbsnodes_s,
    sge_qstat_f,
    squeue,
)

# Job views that name the one node a job ran on beside its end (IBM Spectrum LSF bjobs -l and
# bhist -l; OpenLava lsbatch/cmd/cmd.prt.c prtJobStart "%s: Started" " %d Task(s) on Host(s)"
# " <%s>" and prtJobFinish "Exited with exit code %d."; Slurm's sacct, scontrol show job,
# sinfo -R and sinfo -N -l as the rules' own probes cite them).
# (text, verdict) or (text, verdict, the node as the view names it, when not the host itself)
_Job = tuple[str, tuple[str | None, str]] | tuple[str, tuple[str | None, str], str]


def _job_views(h: str) -> dict[str, _Job]:
    stamp = "Mon Nov 20 10:05:00"
    head = "Job <1234>, User <alice>, Project <default>, Status <EXIT>, Queue <gpu>, Command <a>\n"
    sub = f"{stamp}: Submitted from host <login01>, CWD <$HOME>;\n"
    return {
        "bjobs_l_started_tasks_memlimit": (
            head + sub + f"{stamp}: Started 1 Task(s) on Host(s) <{h}>, Allocated 1 Slot(s) on "
            f"Host(s) <{h}>, Execution Home </home/alice>;\n"
            f"{stamp}: Exited with exit code 137. The CPU time used is 12.0 seconds.\n"
            f"{stamp}: Completed <exit>; TERM_MEMLIMIT: job killed after reaching LSF memory "
            "usage limit.\n",
            ("oom_host", "job"),
        ),
        "bjobs_l_started_on_exit": (
            head + sub + f"{stamp}: Started on <{h}>, Execution Home </home/alice>, Execution "
            "CWD </home/alice>;\n"
            f"{stamp}: Exited with exit code 1. The CPU time used is 12.0 seconds.\n",
            ("user_code", "job"),
        ),
        "bjobs_l_started_on_cluster_host": (
            head + sub + f"{stamp}: Started on <{h}@cluster3>, Execution Home </home/alice>;\n"
            f"{stamp}: Exited with exit code 2. The CPU time used is 1.0 seconds.\n",
            ("user_code", "job"),
        ),
        "bjobs_l_term_host": (
            head + sub + f"{stamp}: Started 8 Task(s) on Host(s) <8*{h}>, Allocated 8 Slot(s) "
            f"on Host(s) <8*{h}>;\n"
            f"{stamp}: Completed <exit>; TERM_HOST: job killed after the host it was running "
            "on was rebooted or shut down.\n",
            NODE,
        ),
        "bhist_l_dispatched_term_host": (
            head + f"{stamp}: Dispatched 1 Task(s) on Host(s) <{h}>, Allocated 1 Slot(s) on "
            f"Host(s) <{h}>, Effective RES_REQ <select[type == local] >;\n"
            f"{stamp}: Starting (Pid 4321);\n"
            f"{stamp}: Exited by LSF signal TERM_HOST. The CPU time used is 12.0 seconds;\n",
            NODE,
        ),
        "bhist_l_dispatched_to": (
            head + f"{stamp}: Dispatched to <{h}>, Effective RES_REQ <select[type == local] >;\n"
            f"{stamp}: Completed <exit>; TERM_RUNLIMIT: job killed after reaching LSF run time "
            "limit.\n",
            ("scheduler", "job"),
        ),
        "sacct_node_fail": (
            "JobID           JobName  Partition      State ExitCode        NodeList\n"
            "------------ ---------- ---------- ---------- -------- ---------------\n"
            f"1234              train        gpu  NODE_FAIL      0:0 {h:>15}\n",
            NODE,
        ),
        "scontrol_job_node_down": (
            "JobId=1234 JobName=train\n   UserId=alice(1000) GroupId=alice(1000)\n"
            "   JobState=NODE_FAIL Reason=NodeDown Dependency=(null)\n   ExitCode=0:0\n"
            f"   NodeList={h}\n   BatchHost={h}\n",
            NODE,
        ),
        "sinfo_R_not_responding": (
            "REASON               USER      TIMESTAMP           NODELIST\n"
            f"Not responding       slurm     2023-11-20T10:00:00 {h}\n",
            NODE,
        ),
        "sinfo_N_l_down": (
            "NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT "
            "AVAIL_FE REASON\n"
            f"{h}        1      gpu*       down* 64     2:16:2 512000        0      1   (null) "
            "Not responding\n"
            f"{OK}        1      gpu*        idle 64     2:16:2 512000        0      1   (null) "
            "none\n",
            NODE,
        ),
        # bjobs -l as LSF prints it, folded at 80 columns after 21 spaces (cmd.misc.c prtLine),
        # the host cut in two by the fold
        "bjobs_l_folded_host": (
            "Job <78856>, User <jane>, Project <default>, Status <EXIT>, Queue <normal>, Com\n"
            "                     mand <./train.sh>\n"
            f"{stamp}: Started 1 Task(s) on Host(s) <{h[:4]}\n"
            f"                     {h[4:]}.site.example.org>, Allocated 1 Slot(s) on Host(s)\n"
            f"                     <{h}.site.example.org>, Execution Home </home/jane>;\n"
            f"{stamp}: Exited with exit code 1. The CPU time used is 153.0 seconds.\n",
            ("user_code", "job"),
            f"{h}.site.example.org",
        ),
        "squeue_out_of_memory": (squeue([("OOM", h), ("R", OK)]), ("oom_host", "job")),
    }


_JOB_KEYS = sorted(_job_views("a1"))


@pytest.mark.parametrize("key", _JOB_KEYS)
@pytest.mark.parametrize("host", HOSTS)
def test_a_job_view_names_the_one_node_the_job_ran_on(key: str, host: str) -> None:
    text, want, *named = _job_views(host)[key]
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, named[0] if named else host)


def test_a_job_started_on_several_hosts_names_none() -> None:
    text = (
        "Mon Nov 20 10:00:05: Started 16 Task(s) on Host(s) <8*gpu-n07> <8*gpu-n08>, "
        "Allocated 16 Slot(s) on Host(s) <8*gpu-n07> <8*gpu-n08>;\n"
        "Mon Nov 20 10:05:00: Exited with exit code 1. The CPU time used is 12.0 seconds.\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", None)


# The same job views over a folded node range ("gpu-n[07-08]"): the failure is the job's
# nodes', and the view does not say which; scontrol's BatchHost is only the first of them.
RANGES = {
    "scontrol_node_fail_range": (
        "JobId=1234 JobName=train\n   JobState=NODE_FAIL Reason=NodeDown Dependency=(null)\n"
        "   ExitCode=0:0\n   NodeList=gpu-n[07-08]\n   BatchHost=gpu-n07\n"
    ),
    "sacct_node_fail_range": (
        "JobID           JobName  Partition      State ExitCode        NodeList\n"
        "------------ ---------- ---------- ---------- -------- ---------------\n"
        "1234              train        gpu  NODE_FAIL      0:0    gpu-n[07-08]\n"
    ),
    "squeue_node_fail_range": squeue([("NF", "gpu-n[07-08]")]),
}


@pytest.mark.parametrize("key", sorted(RANGES))
def test_a_job_view_over_a_node_range_names_none(key: str) -> None:
    got = explain_text(RANGES[key])
    assert (got.category, got.blame, got.node) == ("node", "node", None)


# A host column that cuts longer names: bhosts' "%-18.18s" (OpenLava; IBM's LSF puts "*" in
# front of a cut name) and Grid Engine 6.0's "%-30.30s" queue name. A name that fills the column
# may be a cut one, so it names no node; the verdict stands.
CUT = {
    "bhosts_cut_openlava": bhosts([("gpu-rack07-node012", "unavail"), (OK, "ok")]),
    "bhosts_cut_ibm": bhosts([("*ack07-node012.dc1", "unavail"), (OK, "ok")]),
    "sge_qstat_f_cut": sge_qstat_f([("gpu-rack07-node0123.dc1x", "-NA-", "au"), (OK, "0.01", "")]),
}


@pytest.mark.parametrize("key", sorted(CUT))
def test_a_host_name_the_column_may_have_cut_names_none(key: str) -> None:
    got = explain_text(CUT[key])
    assert (got.category, got.blame, got.node) == ("node", "node", None)


# A healthy view pasted beside a fault that names no host: the view's only host is healthy and
# is not the fault's (the views read here give a host only to rows out of service).
_XID = (
    "[ 2345.678901] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
    "GPU has fallen off the bus.\n"
)
HEALTHY = {
    "pbsnodes_a": pbsnodes_a([("gpu-n07", "free", "")]),
    "pbsnodes_aS": pbsnodes_s([("gpu-n07", "job-busy", "")]),
    "bhosts": bhosts([("gpu-n07", "ok")]),
    "bhosts_l": bhosts_l("gpu-n07", "ok"),
    "sge_qstat_f": sge_qstat_f([("gpu-n07", "0.01", "")]),
    "squeue": squeue([("R", "gpu-n07")]),
}


@pytest.mark.parametrize("key", sorted(HEALTHY))
@pytest.mark.parametrize("first", [True, False])
def test_a_healthy_row_beside_an_unplaced_fault_is_not_named(key: str, first: bool) -> None:
    view = HEALTHY[key]
    got = explain_text(view + "\n" + _XID if first else _XID + "\n" + view)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None)
