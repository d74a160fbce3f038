"""Culprit hosts in the formats of cluster managers, launchers and schedulers (probe set fourteen).

Each format is the emitter's own (its Fmt cites repository, path and commit); the culprit is the
node the emitter says failed, never the host that printed the line:
- SchedMD/slurm @SLURM_COMMIT: slurmctld job_mgr.c kill_running_job_by_node_name "Removing failed
  node %s from %pJ", "requeue job %pJ due to failure of node %s", "Killing %pJ on failed node %s"
  (stepmgr.c "Killing %pS on failed node %s"), _job_epilog_complete "%s: %pJ epilog error on %s,
  draining the node"; agent.c "Epilog failure on host %s, setting DOWN"; proc_req.c "slurmd error
  running %pI on Node(s)=%s: %s" with slurm_errno.c's text, which drains that node; %pJ prints
  "JobId=%u", %pI "StepId=%u.%u" (or "JobId=%u" for a whole job) and %pS "JobId=%u StepId=%u"
  (src/common/log.c log_build_step_id_str, _stepid2fmt);
- kubernetes/kubernetes pkg/controller/util/node/controller_utils.go @025f2834a128 DeletePods:
  "Marking for deletion Pod %s from Node %s" (NodeControllerEviction) and "Node %s event:
  Deleting all Pods from Node %v." (DeletingAllPods), for a node NotReady or unreachable past its
  eviction timeout; RecordNodeStatusChange "Node %s status is now: %s";
  pkg/controller/nodelifecycle/node_lifecycle_controller.go @003e86297d18
  processTaintBaseEviction "Node is NotReady. Adding it to the Taint queue" and "Node is
  unresponsive. ..." with klog's node="%s" (before structured logging: "Node %v is NotReady as
  of %v. Adding it to the Taint queue."); kube-controller-manager relays events through
  k8s.io/client-go tools/record event.go ("Event occurred" object=... message="..."), often read
  from the control-plane host's journal, whose host is never the culprit;
- ray-project/ray src/ray/gcs/gcs_server/gcs_actor_manager.cc @47ac75aecf32 GenNodeDiedCause "The
  actor is dead because its node has died. Node Id: %s" (later "The actor died because ..."),
  under python/ray/exceptions.py @007329712e97 RayActorError's "\\tip: %s" (the actor's node);
- openpmix/prrte src/mca/oob/tcp/oob_tcp_connection.c @066b56055c4f prte_oob_tcp_peer_try_connect:
  "A process or daemon was unable to complete a TCP connection\\nto another process:\\n  Local
  host:    %s\\n  Remote host:   %s\\n..." with the peer's node name, else its address
  (pmix_net_get_hostname: dotted IPv4 or IPv6 text), else "<unknown>".

Verdicts follow tests/fixtures/corpus/README.md: a node that stopped responding or failed for
its scheduler is node/node on that node; a socket failure is interconnect/unknown on the peer it
names (none for "<unknown>"); a node's death under an actor is node/unknown on the actor's ip.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, SLURM_COMMIT, Fmt, check, params

_AT = f"@{SLURM_COMMIT[:10]}"
NODE = ("node", "node")
NET = ("interconnect", "unknown")
# slurmctld's log prefixes: its own "[%s] " timestamp (log.c, LOG_FMT_ISO8601_MS), syslog's
_CTLD = (
    "[2026-03-12T08:14:02.511] ",
    "[2026-03-12T08:14:02.511] error: ",
    "Mar 12 08:14:02 slurm-ctl-01 slurmctld[1412]: error: ",
)
_JOBS = ("JobId=4711", "JobId=123456", "JobId=98765_3(98766)")
KUBE = "kubernetes/kubernetes pkg/controller/util/node/controller_utils.go@025f2834a1"
# kubectl get events' columns before the message (LAST SEEN, TYPE, REASON, OBJECT), and the
# describe-pod Events table (Type, Reason, Age, From)
_EVENT_COLS = (
    "12m         Normal    {reason}   {obj}   ",
    "  Normal  {reason}  3m2s  node-controller  ",
    "",
)
# a node event's OBJECT is the node itself
_NODE_EVENT_COLS = (
    "12m         Normal    {reason}   node/{host}   ",
    "  Normal  {reason}  3m2s  node-controller  ",
    "",
)
PRRTE = "openpmix/prrte src/mca/oob/tcp/oob_tcp_connection.c@066b56055c"
_RULE = "-" * 60
# (as pmix_net_get_hostname or prte_get_proc_hostname print it, the host it names)
_REMOTE = (
    (HOSTS[1], HOSTS[1]),
    ("10.4.0.17", "10.4.0.17"),
    (HOSTS[4], HOSTS[4]),
    ("2001:db8:12::17", "2001:db8:12::17"),
    (HOSTS[6], HOSTS[6]),
    ("192.168.100.5", "192.168.100.5"),
)

SLURMCTLD = [
    Fmt(
        "ctld-removing-failed-node",
        f"SchedMD/slurm src/slurmctld/job_mgr.c{_AT}",
        "Removing failed node {host} from {job}\n",
        {"host": HOSTS, "job": _JOBS},
        NODE,
        "host",
        prefixes=_CTLD,
    ),
    Fmt(
        "ctld-killing-step-on-failed-node",
        f"SchedMD/slurm src/stepmgr/stepmgr.c{_AT}",
        "Killing {step} on failed node {host}\n",
        {
            "host": HOSTS,
            "step": ("JobId=4711 StepId=0", "JobId=123456 StepId=2", "JobId=98765 StepId=batch"),
        },
        NODE,
        "host",
        prefixes=_CTLD,
    ),
    Fmt(
        "ctld-epilog-error",
        f"SchedMD/slurm src/slurmctld/job_mgr.c{_AT}",
        "_job_epilog_complete: {job} epilog error on {host}, draining the node\n",
        {"host": HOSTS, "job": _JOBS},
        NODE,
        "host",
        prefixes=_CTLD,
    ),
    Fmt(
        "ctld-epilog-failure-down",
        f"SchedMD/slurm src/slurmctld/agent.c{_AT}",
        "Epilog failure on host {host}, setting DOWN\n",
        {"host": HOSTS},
        NODE,
        "host",
        prefixes=_CTLD,
    ),
    Fmt(
        "ctld-slurmd-error-running",
        f"SchedMD/slurm src/slurmctld/proc_req.c{_AT}",
        "slurmd error running {step} on Node(s)={host}: {err}\n",
        {
            "host": HOSTS,
            "step": ("JobId=4711", "StepId=4711.batch", "StepId=123456.0"),
            # slurm_errno.c: ESLURMD_KILL_TASK_FAILED, _EPILOG_FAILED, _PROLOG_FAILED
            "err": ("Kill task failed", "Job epilog failed", "Job prolog failed"),
        },
        NODE,
        "host",
        prefixes=_CTLD,
    ),
]

KUBERNETES = [
    Fmt(
        "k8s-node-controller-eviction",
        KUBE,
        "Marking for deletion Pod {pod} from Node {host}\n",
        {
            "host": (*HOSTS, "ip-10-1-2-3.ec2.internal", "gke-gpu-pool-3f1a-dpv7"),
            "pod": ("trainer-0", "llm-worker-5xq2k", "ray-head-7d9f8"),
            "reason": ("NodeControllerEviction",),
            "obj": ("pod/trainer-0",),
        },
        NODE,
        "host",
        prefixes=_EVENT_COLS,
    ),
    Fmt(
        "k8s-deleting-all-pods",
        KUBE,
        "Node {host} event: Deleting all Pods from Node {host}.\n",
        {
            "host": (*HOSTS, "ip-10-1-2-3.ec2.internal"),
            "reason": ("DeletingAllPods",),
        },
        NODE,
        "host",
        prefixes=_NODE_EVENT_COLS,
    ),
    Fmt(
        "k8s-node-status-change",
        KUBE,
        "Node {host} status is now: NodeNotReady\n",
        {"host": HOSTS, "reason": ("NodeNotReady",)},
        NODE,
        "host",
        prefixes=_NODE_EVENT_COLS,
    ),
]

NODELIFECYCLE = (
    "kubernetes/kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go@003e86297d"
)
# kube-controller-manager's klog header, alone or behind the control plane's journal
_KCM = (
    "I0514 09:33:57.706580       1 ",
    "May 14 09:33:57 k8s-master1 kube-controller-manager[5213]: I0514 09:33:57.706580    5213 ",
    "2024-05-14T09:33:57.706580Z\tI0514 09:33:57.706580       1 ",
)
_STAMP = "2024-05-14 09:33:57.706574115 +0000 UTC m=+9961.472114546"

CONTROLLER_MANAGER = [
    Fmt(
        "kcm-taint-queue",
        NODELIFECYCLE,
        'node_lifecycle_controller.go:1023] "Node is {state}. Adding it to the Taint queue" '
        'node="{host}" timeStamp="{ts}"\n',
        {"host": HOSTS, "state": ("NotReady", "unresponsive"), "ts": (_STAMP,)},
        NODE,
        "host",
        prefixes=_KCM,
    ),
    Fmt(
        "kcm-taint-queue-infof",
        NODELIFECYCLE,
        "node_lifecycle_controller.go:868] Node {host} is {state} as of {ts}. Adding it to the "
        "Taint queue.\n",
        {"host": HOSTS, "state": ("NotReady", "unresponsive"), "ts": (_STAMP,)},
        NODE,
        "host",
        prefixes=_KCM,
    ),
    *(
        Fmt(
            f"kcm-event-{reason}",
            KUBE,
            'event.go:291] "Event occurred" object="' + obj + '" kind="' + kind + '" '
            'apiVersion="v1" type="Normal" reason="' + reason + '" message="' + msg + '"\n',
            {"host": HOSTS},
            NODE,
            "host",
            prefixes=_KCM,
        )
        for kind, obj, reason, msg in (
            ("Node", "{host}", "NodeNotReady", "Node {host} status is now: NodeNotReady"),
            (
                "Pod",
                "default/trainer-0",
                "NodeControllerEviction",
                "Marking for deletion Pod trainer-0 from Node {host}",
            ),
            (
                "Node",
                "{host}",
                "DeletingAllPods",
                "Node {host} event: Deleting all Pods from Node {host}.",
            ),
        )
    ),
]

RAY = [
    Fmt(
        "ray-actor-node-died",
        "ray-project/ray src/ray/gcs/gcs_server/gcs_actor_manager.cc@47ac75aecf",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: {cls}\n\tactor_id: 8f2d61c3e0b5a1f9e2a4d7c601000000\n\tpid: {pid}\n"
        "\tnamespace: 3c1e2f44-5b6a-4c7d-8e9f-0a1b2c3d4e5f\n\tip: {ip}\n"
        "The actor {was} because its node has died. Node Id: 56b97436e67393f15565e024278867\n",
        {
            "cls": ("RayTrainWorker", "LLMEngine", "Trainer"),
            "pid": (40123, 77, 902211),
            "ip": ("10.4.0.17", "192.168.100.5", "172.31.12.9"),
            "was": ("is dead", "died"),
        },
        ("node", "unknown"),
        "ip",
    ),
]

PRRTE_TCP = [
    Fmt(
        "prrte-tcp-connect-failed",
        PRRTE,
        _RULE + "\nA process or daemon was unable to complete a TCP connection\n"
        "to another process:\n  Local host:    {local}\n  Remote host:   {remote}\n"
        "This is usually caused by a firewall on the remote host. Please\n"
        "check that any firewall (e.g., iptables) has been disabled and\ntry again.\n"
        + _RULE
        + "\n",
        {"local": (HOSTS[0], HOSTS[3], HOSTS[7]), "remote": _REMOTE},
        NET,
        "remote",
    ),
]

FORMATS = SLURMCTLD + KUBERNETES + CONTROLLER_MANAGER + RAY + PRRTE_TCP


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_manager_line_names_the_node_it_reports_failed(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


def test_a_tcp_connect_failure_to_an_unknown_peer_names_no_host() -> None:
    # prte_oob_tcp_peer_try_connect prints "<unknown>" when it has neither name nor address
    text = (
        "A process or daemon was unable to complete a TCP connection\nto another process:\n"
        f"  Local host:    {HOSTS[2]}\n  Remote host:   <unknown>\n"
        "This is usually caused by a firewall on the remote host. Please\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", None)


def test_the_daemon_launch_failure_after_a_tcp_connect_failure_keeps_the_remote_host() -> None:
    # mpirun's [failed-daemon-launch] help block follows the HNP's TCP failure: it names no node,
    # so the peer of the TCP failure stays the culprit, never the local (printing) host
    text = (
        "A process or daemon was unable to complete a TCP connection\nto another process:\n"
        f"  Local host:    {HOSTS[0]}\n  Remote host:   {HOSTS[5]}\n"
        "This is usually caused by a firewall on the remote host. Please\n"
        "check that any firewall (e.g., iptables) has been disabled and\ntry again.\n"
        + _RULE
        + "\n"
        + "-" * 74
        + "\nORTE was unable to reliably start one or more daemons.\nThis usually is caused by:\n"
    )
    assert _verdict(text) == ("interconnect", "unknown", HOSTS[5])


def test_a_slurmd_error_from_a_node_in_a_race_names_no_node() -> None:
    # proc_req.c logs a step already gone ("from Node(s)=", ESLURMD_STEP_NOTRUNNING) with info():
    # "race condition on job termination, not a real error"
    got = explain_text(
        "[2026-03-12T08:14:02.511] slurmd error running StepId=4711.0 from Node(s)=gpu-a-07: "
        "Job step not running\n"
    )
    assert got.node is None


def test_a_removed_failed_node_is_the_culprit_over_the_surviving_node_s_cancel() -> None:
    # the survivors' slurmstepd prints its own node after ON (req.c); slurmctld names the failed one
    text = (
        "[2026-03-12T08:14:02.511] error: Removing failed node nid001234 from JobId=4711\n"
        "slurmstepd: error: *** STEP 4711.0 ON nid001240 CANCELLED AT 2026-03-12T08:14:03 DUE TO "
        "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n"
    )
    assert _verdict(text) == ("node", "node", "nid001234")
