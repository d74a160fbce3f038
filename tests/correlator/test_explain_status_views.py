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
from tests.correlator.status_views import (
    HOSTS,
    NODE,
    OK,
    bhosts,
    bhosts_l,
    kubectl_nodes,
    kubectl_pods,
    pbsnodes_a,
    pbsnodes_l,
    pbsnodes_s,
    sge_qstat_f,
    squeue,
)


# (view, failing state) -> (text of the view with `h` failing beside a healthy node, the same
# with two failing nodes, the verdict)
def _views(h: str, g: str) -> dict[str, tuple[str, str, tuple[str | None, str]]]:
    comment = "node down: communication closed"
    return {
        "pbsnodes_a_down": (
            pbsnodes_a([(OK, "free", ""), (h, "down", comment)]),
            pbsnodes_a([(h, "down", comment), (g, "down", comment)]),
            NODE,
        ),
        "pbsnodes_a_offline": (
            pbsnodes_a([(h, "offline", "GPU fell off the bus"), (OK, "job-busy", "")]),
            pbsnodes_a([(h, "offline", "maintenance"), (g, "down,offline", "")]),
            NODE,
        ),
        "pbsnodes_a_stale": (
            pbsnodes_a([(OK, "free", ""), (h, "state-unknown,down", "")]),
            pbsnodes_a([(h, "Stale", ""), (g, "Stale", "")]),
            NODE,
        ),
        "pbsnodes_l": (
            pbsnodes_l([(h, "offline", "Xid 79 on GPU 3")]),
            pbsnodes_l([(h, "down", comment), (g, "down", comment)]),
            NODE,
        ),
        "pbsnodes_aS_down": (
            pbsnodes_s([(OK, "free", ""), (h, "down", comment)]),
            pbsnodes_s([(h, "offline", "maintenance"), (g, "down", comment)]),
            NODE,
        ),
        "bhosts_unavail": (
            bhosts([(OK, "ok"), (h, "unavail")]),
            bhosts([(h, "unavail"), (g, "unavail")]),
            NODE,
        ),
        "bhosts_unreach": (
            bhosts([(h, "unreach"), (OK, "ok")]),
            bhosts([(h, "unreach"), (g, "unreach")]),
            NODE,
        ),
        "bhosts_w_closed_adm": (
            bhosts([(OK, "closed_Full"), (h, "closed_Adm")]),
            bhosts([(h, "closed_Adm"), (g, "closed_Adm")]),
            NODE,
        ),
        "bhosts_l_unavail": (
            bhosts_l(h, "unavail") + bhosts_l(OK, "ok"),
            bhosts_l(h, "unavail") + bhosts_l(g, "closed_Adm"),
            NODE,
        ),
        "sge_qstat_f_unknown": (
            sge_qstat_f([(OK, "0.01", ""), (h, "-NA-", "au")]),
            sge_qstat_f([(h, "-NA-", "au"), (g, "-NA-", "au")]),
            NODE,
        ),
        "sge_qstat_f_error": (
            sge_qstat_f([(h, "0.02", "E"), (OK, "0.50", "a")]),
            sge_qstat_f([(h, "0.02", "E"), (g, "0.02", "E")]),
            NODE,
        ),
        "sge_qstat_f_disabled": (
            sge_qstat_f([(OK, "0.01", ""), (h, "0.00", "d")]),
            sge_qstat_f([(h, "0.00", "d"), (g, "0.00", "d")]),
            NODE,
        ),
        "squeue_node_fail": (
            squeue([("R", OK), ("NF", h)]),
            squeue([("NF", h), ("NF", g)]),
            NODE,
        ),
        "kubectl_nodes_unknown": (
            kubectl_nodes([(OK, "Ready"), (h, "Unknown")]),
            kubectl_nodes([(h, "Unknown"), (g, "Unknown,SchedulingDisabled")]),
            NODE,
        ),
        "kubectl_nodes_not_ready": (
            kubectl_nodes([(h, "NotReady"), (OK, "Ready")]),
            kubectl_nodes([(h, "NotReady"), (g, "NotReady,SchedulingDisabled")]),
            NODE,
        ),
        "kubectl_pods_oomkilled": (
            kubectl_pods([(h, "OOMKilled"), (OK, "Running")]),
            kubectl_pods([(h, "OOMKilled"), (g, "OOMKilled")]),
            ("oom_host", "job"),
        ),
        "kubectl_pods_node_lost": (
            kubectl_pods([(h, "Unknown"), (OK, "Running")]),
            kubectl_pods([(h, "NodeLost"), (g, "Unknown")]),
            NODE,
        ),
        "kubectl_pods_node_affinity": (
            kubectl_pods([(OK, "Running"), (h, "NodeAffinity")]),
            kubectl_pods([(h, "NodeAffinity"), (g, "NodeAffinity")]),
            ("scheduler", "infra"),
        ),
        "kubectl_pods_unexpected_admission": (
            kubectl_pods([(h, "UnexpectedAdmissionError"), (OK, "Running")]),
            kubectl_pods([(h, "UnexpectedAdmissionError"), (g, "UnexpectedAdmissionError")]),
            ("node", "unknown"),
        ),
        "kubectl_pods_crashloop": (
            kubectl_pods([(OK, "Running"), (h, "CrashLoopBackOff")]),
            kubectl_pods([(h, "CrashLoopBackOff"), (g, "CrashLoopBackOff")]),
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
    "pbsnodes_a_free": pbsnodes_a([("gpu-n07", "free", ""), ("gpu-n08", "job-busy", "")]),
    "bhosts_closed_full": bhosts([("gpu-n07", "closed"), ("gpu-n08", "ok")]),
    "bhosts_w_closed_full": bhosts([("gpu-n07", "closed_Full"), ("gpu-n08", "closed_Excl")]),
    "bhosts_l_ok": bhosts_l("gpu-n07", "ok"),
    "sge_qstat_f_alarm": sge_qstat_f([("gpu-n07", "9.50", "a"), ("gpu-n08", "0.01", "")]),
    "squeue_completing": squeue([("CG", "gpu-n07"), ("R", "gpu-n08")]),
    "squeue_running_pending": squeue([("R", "gpu-n07"), ("PD", "(Resources)")]),
    "kubectl_nodes_cordoned": kubectl_nodes(
        [("gpu-n07", "Ready,SchedulingDisabled"), ("gpu-n08", "Ready")]
    ),
    # a bare pod status whose cause the row does not show: an eviction without the kubelet's
    # message (memory pressure or ephemeral storage?), a container the kubelet lost track of,
    # a container that exited non-zero (Error: any code), a pod being deleted
    "kubectl_pods_bare_statuses": kubectl_pods(
        [
            ("gpu-n07", "Evicted"),
            ("gpu-n08", "ContainerStatusUnknown"),
            ("gpu-n09", "Error"),
            ("gpu-n10", "Terminating"),
        ]
    ),
    "kubectl_pods_running": kubectl_pods([("gpu-n07", "Running"), ("gpu-n08", "Completed")]),
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
