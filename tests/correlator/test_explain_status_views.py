"""Probe set twenty: the node and job status views people paste, read from each tool's format.

Each view is built as its tool prints it (the format strings are cited beside the rules and
readers that read them: correlator/rules/emitters/slurm.json's pbs_node_state_down,
lsf_host_unavailable and sge_queue_instance_error, kubelet.json's k8s_node_status_unknown,
correlator/explain/hosts_status.py, readers_squeue.py, hosts_fields.py's LSF job history
patterns). A view that singles one node out in a failing state names it; the same view with two
nodes in that state names none; a healthy row is never named; a state that is no fault (a full
LSF host, an SGE load alarm, a completing Slurm job, a cordoned Kubernetes node) reads as
nothing. Labels follow the corpus policy (tests/fixtures/corpus/README.md, "Label policy").
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

HOSTS = ("gpu-n07", "node0123", "dgx-h100-031", "compute-1-17")
OK = "ok-n99"  # a healthy node beside the failing one
NODE = ("node", "node")


def _pbsnodes_a(rows: list[tuple[str, str, str]]) -> str:
    # openpbs src/cmds/pbsnodes.c prt_node: the name, "     %s = %s" attributes, a blank line
    out = []
    for host, state, comment in rows:
        out += [host, f"     Mom = {host}.cluster", "     ntype = PBS", f"     state = {state}"]
        out += ["     pcpus = 64", f"     resources_available.host = {host}"]
        out += [f"     comment = {comment}"] if comment else []
        out += ["     resources_available.ngpus = 8", ""]
    return "\n".join(out)


def _pbsnodes_l(rows: list[tuple[str, str, str]]) -> str:
    # pbsnodes -l LISTMRK: printf("%-20s %s %s\n", name, state, comment)
    return "".join(f"{h:<20} {s} {c}\n" for h, s, c in rows)


def _pbsnodes_s(rows: list[tuple[str, str, str]]) -> str:
    # pbsnodes -aS prt_node_summary: "%-15.15s %-15.15s %-8.8s %-8.8s %-15.15s %-10.10s %8.8s
    # %7.7s %7.7s %7.7s %s" under its header and dashes
    head = (
        "vnode           state           OS       hardware host            queue        mem     "
        "ncpus   nmics   ngpus  comment\n"
        "--------------- --------------- -------- -------- --------------- ---------- -------- "
        "------- ------- ------- ---------\n"
    )
    return head + "".join(
        f"{h:<15.15} {s:<15.15} {'--':<8} {'--':<8} {h:<15.15} {'--':<10} {'512gb':>8} "
        f"{'64':>7} {'0':>7} {'8':>7} {c or '--'}\n"
        for h, s, c in rows
    )


def _bhosts(rows: list[tuple[str, str]]) -> str:
    # OpenLava bhosts.c prtHostsShort: HOST_NAME (18) STATUS (11, 14 with -w) JL/U MAX NJOBS ...
    head = "HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV\n"
    return head + "".join(
        f"{h:<18} {s:<11}     -     8      0      0      0      0      0\n" for h, s in rows
    )


def _bhosts_l(host: str, status: str) -> str:
    # bhosts.c prtHostsLong: "HOST  %s", the STATUS header, the status row, a blank line
    return (
        f"HOST  {host}\n"
        "STATUS           CPUF  JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV DISPATCH_WINDOW\n"
        f"{status:<14} 60.00     -     16      0      0      0      0      0      -\n\n"
        " LOAD THRESHOLD USED FOR SCHEDULING:\n"
    )


def _sge_qstat_f(rows: list[tuple[str, str, str]]) -> str:
    # qstat(1) Full Format: queuename qtype resv/used/tot. load_avg arch states, rows between rules
    rule = "-" * 81 + "\n"
    head = "queuename                      qtype resv/used/tot. load_avg arch          states\n"
    body = "".join(
        rule
        + f"{'all.q@' + h:<30} BIP   0/0/8          {load:<8} lx-amd64      {st}".rstrip()
        + "\n"
        for h, load, st in rows
    )
    return head + body


def _squeue(rows: list[tuple[str, str]]) -> str:
    # src/squeue/opts.c default "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
    head = "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
    return head + "".join(
        f"{1230 + n:>18} {'gpu':>9} {'train':>8} {'alice':>8} {st:>2} {'5:00':>10} {1:>6} {where}\n"
        for n, (st, where) in enumerate(rows)
    )


def _kubectl_nodes(rows: list[tuple[str, str]]) -> str:
    # printers.go printNode: NAME STATUS ROLES AGE VERSION, padded by the tabwriter
    head = "NAME              STATUS                        ROLES    AGE   VERSION\n"
    return head + "".join(f"{h:<17} {s:<29} <none>   30d   v1.28.3\n" for h, s in rows)


def _kubectl_pods(rows: list[tuple[str, str]]) -> str:
    # printers.go printPod, -o wide: NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE ...
    head = (
        "NAME        READY   STATUS                     RESTARTS   AGE   IP          NODE"
        "              NOMINATED NODE   READINESS GATES\n"
    )
    return head + "".join(
        f"trainer-{n}   0/1     {st:<26} 3          10m   10.0.0.{n + 5:<4} {h:<17} <none>"
        "           <none>\n"
        for n, (h, st) in enumerate(rows)
    )


# (view, failing state) -> (text of the view with `h` failing beside a healthy node, the same
# with two failing nodes, the verdict)
def _views(h: str, g: str) -> dict[str, tuple[str, str, tuple[str | None, str]]]:
    comment = "node down: communication closed"
    return {
        "pbsnodes_a_down": (
            _pbsnodes_a([(OK, "free", ""), (h, "down", comment)]),
            _pbsnodes_a([(h, "down", comment), (g, "down", comment)]),
            NODE,
        ),
        "pbsnodes_a_offline": (
            _pbsnodes_a([(h, "offline", "GPU fell off the bus"), (OK, "job-busy", "")]),
            _pbsnodes_a([(h, "offline", "maintenance"), (g, "down,offline", "")]),
            NODE,
        ),
        "pbsnodes_a_stale": (
            _pbsnodes_a([(OK, "free", ""), (h, "state-unknown,down", "")]),
            _pbsnodes_a([(h, "Stale", ""), (g, "Stale", "")]),
            NODE,
        ),
        "pbsnodes_l": (
            _pbsnodes_l([(h, "offline", "Xid 79 on GPU 3")]),
            _pbsnodes_l([(h, "down", comment), (g, "down", comment)]),
            NODE,
        ),
        "pbsnodes_aS_down": (
            _pbsnodes_s([(OK, "free", ""), (h, "down", comment)]),
            _pbsnodes_s([(h, "offline", "maintenance"), (g, "down", comment)]),
            NODE,
        ),
        "bhosts_unavail": (
            _bhosts([(OK, "ok"), (h, "unavail")]),
            _bhosts([(h, "unavail"), (g, "unavail")]),
            NODE,
        ),
        "bhosts_unreach": (
            _bhosts([(h, "unreach"), (OK, "ok")]),
            _bhosts([(h, "unreach"), (g, "unreach")]),
            NODE,
        ),
        "bhosts_w_closed_adm": (
            _bhosts([(OK, "closed_Full"), (h, "closed_Adm")]),
            _bhosts([(h, "closed_Adm"), (g, "closed_Adm")]),
            NODE,
        ),
        "bhosts_l_unavail": (
            _bhosts_l(h, "unavail") + _bhosts_l(OK, "ok"),
            _bhosts_l(h, "unavail") + _bhosts_l(g, "closed_Adm"),
            NODE,
        ),
        "sge_qstat_f_unknown": (
            _sge_qstat_f([(OK, "0.01", ""), (h, "-NA-", "au")]),
            _sge_qstat_f([(h, "-NA-", "au"), (g, "-NA-", "au")]),
            NODE,
        ),
        "sge_qstat_f_error": (
            _sge_qstat_f([(h, "0.02", "E"), (OK, "0.50", "a")]),
            _sge_qstat_f([(h, "0.02", "E"), (g, "0.02", "E")]),
            NODE,
        ),
        "sge_qstat_f_disabled": (
            _sge_qstat_f([(OK, "0.01", ""), (h, "0.00", "d")]),
            _sge_qstat_f([(h, "0.00", "d"), (g, "0.00", "d")]),
            NODE,
        ),
        "squeue_node_fail": (
            _squeue([("R", OK), ("NF", h)]),
            _squeue([("NF", h), ("NF", g)]),
            NODE,
        ),
        "kubectl_nodes_unknown": (
            _kubectl_nodes([(OK, "Ready"), (h, "Unknown")]),
            _kubectl_nodes([(h, "Unknown"), (g, "Unknown,SchedulingDisabled")]),
            NODE,
        ),
        "kubectl_nodes_not_ready": (
            _kubectl_nodes([(h, "NotReady"), (OK, "Ready")]),
            _kubectl_nodes([(h, "NotReady"), (g, "NotReady,SchedulingDisabled")]),
            NODE,
        ),
        "kubectl_pods_oomkilled": (
            _kubectl_pods([(h, "OOMKilled"), (OK, "Running")]),
            _kubectl_pods([(h, "OOMKilled"), (g, "OOMKilled")]),
            ("oom_host", "job"),
        ),
        "kubectl_pods_node_lost": (
            _kubectl_pods([(h, "Unknown"), (OK, "Running")]),
            _kubectl_pods([(h, "NodeLost"), (g, "Unknown")]),
            NODE,
        ),
        "kubectl_pods_node_affinity": (
            _kubectl_pods([(OK, "Running"), (h, "NodeAffinity")]),
            _kubectl_pods([(h, "NodeAffinity"), (g, "NodeAffinity")]),
            ("scheduler", "infra"),
        ),
        "kubectl_pods_unexpected_admission": (
            _kubectl_pods([(h, "UnexpectedAdmissionError"), (OK, "Running")]),
            _kubectl_pods([(h, "UnexpectedAdmissionError"), (g, "UnexpectedAdmissionError")]),
            ("node", "unknown"),
        ),
        "kubectl_pods_crashloop": (
            _kubectl_pods([(OK, "Running"), (h, "CrashLoopBackOff")]),
            _kubectl_pods([(h, "CrashLoopBackOff"), (g, "CrashLoopBackOff")]),
            ("user_code", "job"),
        ),
    }


_PAIRS = [(h, HOSTS[(n + 1) % len(HOSTS)]) for n, h in enumerate(HOSTS)]
_KEYS = sorted(_views("a1", "b2"))


@pytest.mark.parametrize("key", _KEYS)
@pytest.mark.parametrize(("host", "other"), _PAIRS)
def test_a_view_singling_one_failing_node_out_names_it(key: str, host: str, other: str) -> None:
    text, _, want = _views(host, other)[key]
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, host)


@pytest.mark.parametrize("key", _KEYS)
@pytest.mark.parametrize(("host", "other"), _PAIRS)
def test_a_view_with_two_nodes_failing_alike_names_none(key: str, host: str, other: str) -> None:
    _, text, want = _views(host, other)[key]
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, None)


# Views whose only rows are healthy, or whose states are no fault: nothing to explain, no node.
QUIET = {
    "pbsnodes_a_free": _pbsnodes_a([("gpu-n07", "free", ""), ("gpu-n08", "job-busy", "")]),
    "bhosts_closed_full": _bhosts([("gpu-n07", "closed"), ("gpu-n08", "ok")]),
    "bhosts_w_closed_full": _bhosts([("gpu-n07", "closed_Full"), ("gpu-n08", "closed_Excl")]),
    "bhosts_l_ok": _bhosts_l("gpu-n07", "ok"),
    "sge_qstat_f_alarm": _sge_qstat_f([("gpu-n07", "9.50", "a"), ("gpu-n08", "0.01", "")]),
    "squeue_completing": _squeue([("CG", "gpu-n07"), ("R", "gpu-n08")]),
    "squeue_running_pending": _squeue([("R", "gpu-n07"), ("PD", "(Resources)")]),
    "kubectl_nodes_cordoned": _kubectl_nodes(
        [("gpu-n07", "Ready,SchedulingDisabled"), ("gpu-n08", "Ready")]
    ),
    # a bare pod status whose cause the row does not show: an eviction without the kubelet's
    # message (memory pressure or ephemeral storage?), a container the kubelet lost track of,
    # a container that exited non-zero (Error: any code), a pod being deleted
    "kubectl_pods_bare_statuses": _kubectl_pods(
        [
            ("gpu-n07", "Evicted"),
            ("gpu-n08", "ContainerStatusUnknown"),
            ("gpu-n09", "Error"),
            ("gpu-n10", "Terminating"),
        ]
    ),
    "kubectl_pods_running": _kubectl_pods([("gpu-n07", "Running"), ("gpu-n08", "Completed")]),
    # qhost prints no state, only "-" load columns for a host whose execd does not report
    "qhost": (
        "HOSTNAME                ARCH         NCPU NSOC NCOR NTHR  LOAD  MEMTOT  MEMUSE  SWAPTO  "
        "SWAPUS\n" + "-" * 94 + "\n"
        "global                  -               -    -    -    -     -       -       -       -"
        "       -\n"
        "gpu-n07                 lx-amd64        8    1    4    8     -   15.5G       -    2.0G"
        "       -\n"
    ),
}


@pytest.mark.parametrize("key", sorted(QUIET))
def test_a_view_of_healthy_or_faultless_states_reads_as_nothing(key: str) -> None:
    got = explain_text(QUIET[key])
    assert (got.category, got.node) == (None, None)


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
        "squeue_out_of_memory": (_squeue([("OOM", h), ("R", OK)]), ("oom_host", "job")),
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
    "squeue_node_fail_range": _squeue([("NF", "gpu-n[07-08]")]),
}


@pytest.mark.parametrize("key", sorted(RANGES))
def test_a_job_view_over_a_node_range_names_none(key: str) -> None:
    got = explain_text(RANGES[key])
    assert (got.category, got.blame, got.node) == ("node", "node", None)


# A host column that cuts longer names: bhosts' "%-18.18s" (OpenLava; IBM's LSF puts "*" in
# front of a cut name) and Grid Engine 6.0's "%-30.30s" queue name. A name that fills the column
# may be a cut one, so it names no node; the verdict stands.
CUT = {
    "bhosts_cut_openlava": _bhosts([("gpu-rack07-node012", "unavail"), (OK, "ok")]),
    "bhosts_cut_ibm": _bhosts([("*ack07-node012.dc1", "unavail"), (OK, "ok")]),
    "sge_qstat_f_cut": _sge_qstat_f([("gpu-rack07-node0123.dc1x", "-NA-", "au"), (OK, "0.01", "")]),
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
    "pbsnodes_a": _pbsnodes_a([("gpu-n07", "free", "")]),
    "pbsnodes_aS": _pbsnodes_s([("gpu-n07", "job-busy", "")]),
    "bhosts": _bhosts([("gpu-n07", "ok")]),
    "bhosts_l": _bhosts_l("gpu-n07", "ok"),
    "sge_qstat_f": _sge_qstat_f([("gpu-n07", "0.01", "")]),
    "squeue": _squeue([("R", "gpu-n07")]),
}


@pytest.mark.parametrize("key", sorted(HEALTHY))
@pytest.mark.parametrize("first", [True, False])
def test_a_healthy_row_beside_an_unplaced_fault_is_not_named(key: str, first: bool) -> None:
    view = HEALTHY[key]
    got = explain_text(view + "\n" + _XID if first else _XID + "\n" + view)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None)
