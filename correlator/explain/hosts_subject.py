"""Host conventions that name the node a line is ABOUT, not the host that printed it."""

from __future__ import annotations

import re

# Conventions of issue #11's round ten, each read from its emitter's source. Every one names the
# node that the line is about (the node that failed, was drained, rebooted or lost the worker),
# never a host that only reports another's failure: Hydra's "[mpiexec@host]" (the launcher's
# host) and slurmctld's "Node X now responding" (a recovery) are left out on purpose.
_H = r"(?P<h>[A-Za-z0-9][\w.-]*[A-Za-z0-9])"
ROUND10_PATTERNS: tuple[re.Pattern[str], ...] = (
    # MPICH/Intel MPI Hydra's proxy prefix: pmodels/mpich src/pm/hydra/lib/utils/dbg.c
    # (6a79bf6575c3) HYDU_dbg_init "%s@%s" with the proxy's own gethostname(), the "%s" being
    # proxy/pmip_utils.c's "proxy:%d" ("proxy:%d:%d", pgid:id, before 295d05f8b2):
    # "[proxy:0:1@gpu-07] HYDU_create_process (...): execvp error on file ./a.out (...)"
    re.compile(r"^\s*\[proxy:\d+(?::\d+)?@" + _H + r"\] "),
    # slurmctld about one node (SchedMD/slurm 284c3b95f08a): src/slurmctld/node_mgr.c
    # "update_node: node %s reason set to: %s" / "update_node: node %s state set to %s",
    # "drain_nodes: node %s state set to DRAIN", "%s: Node %s unexpectedly rebooted boot_time=";
    # job_mgr.c "Node %s rebooted, killing missing step %u.%u" and "Batch %pJ missing from batch
    # node %s (not found BatchStartTime after startup)"; power_save.c "node %s not resumed by
    # ResumeTimeout(%d), setting DOWN and POWERED_DOWN"
    re.compile(r"\b(?:update_node|drain_nodes): node " + _H + r" (?:reason|state) set to\b"),
    re.compile(
        r"\bNode " + _H + r" (?:unexpectedly rebooted boot_time=|rebooted, killing missing)"
    ),
    re.compile(r"\bBatch \S+ missing from batch node " + _H + r"\b"),
    re.compile(r"\bnode " + _H + r" not resumed by ResumeTimeout\b"),
    # Ray's raylet when a worker dies (ray-project/ray src/ray/raylet/node_manager.cc
    # (a3d430a66d7b) NodeManager::DisconnectClient): "... Node ID: <id> Worker IP address:
    # 10.0.0.7 Worker port: 10525 Worker PID: ..." (the dead worker's node)
    re.compile(r"\bWorker IP address: (?P<h>\d{1,3}(?:\.\d{1,3}){3}) Worker port:"),
    # Horovod elastic (horovod/horovod 2626dc87a3a8): runner/elastic/discovery.py "blacklist
    # failing host: %s"; runner/gloo_run.py "The first process to do so was:\nProcess name:
    # {name}" where runner/elastic/driver.py names it "{hostname}[{local_rank}]"
    re.compile(r"\bblacklist failing host: " + _H + r"\s*$"),
    re.compile(r"^\s*Process name: " + _H + r"\[\d+\]\s*$"),
    # A pod "was evicted from <node>": not an emitter's format (kubelet's eviction messages,
    # kubernetes/kubernetes pkg/kubelet/eviction/helpers.go (008b3652959c) nodeLowMessageFmt
    # "The node was low on resource: %v. ", name no node) but the phrase people and alert bots
    # write above them: read narrowly, a node name with a digit followed by " on "/" at "/":"
    # or the line's end ("fileflows was evicted from control-1 on 2026-08-20 at 19:40:32Z:")
    re.compile(
        r"\bwas evicted from (?:node )?(?P<h>(?=[\w.-]*\d)[A-Za-z0-9][\w.-]*[A-Za-z0-9])"
        r"(?: on | at |:|\.?\s*$)"
    ),
)

# Conventions that name the node a message is ABOUT inside the message (slurmctld's node lines,
# the node lifecycle controller's "Node %s status is now: %s", Ray's raylet about a dead worker,
# Horovod's failing host): the daemon that prints them runs on a control-plane, controller or
# head host, so the line's own printer (its syslog/journal HOSTNAME, RFC 3164 4.1.2) is not
# the node it names. They are tried before the printer's conventions; rules whose capture
# names the node (a verdict's culprit) already outrank the printer in reasoning.node_of.
# Launchers and schedulers that name the node of a task they started elsewhere: the
# scheduler's "Successfully assigned ns/pod to <node>" (kube-scheduler's journal on the
# control plane), srun's "srun: error: <node>: task N: ..." (srun runs on the login or batch
# host), mpirun/prterun's "... on node <node> exited ..." and ORTE/PRRTE's "daemon: [...] on
# node <node>" (the corpus policy: "never the host running mpirun"), MPICH Hydra's "RUNNING AT
# <node>" (the host as the hostfile gave it, a login user in front included)
SUBJECT_PATTERNS: tuple[re.Pattern[str], ...] = (
    *ROUND10_PATTERNS,
    re.compile(r"\bNode (?P<h>[A-Za-z0-9][\w.-]*) status is now: "),
    re.compile(r"Successfully assigned \S+ to (?P<h>[A-Za-z0-9][\w.-]*)\s*$"),
    re.compile(r"srun: error: (?P<h>[A-Za-z0-9][\w.-]*): tasks? [\d,-]+"),
    re.compile(r"\bon node (?P<h>[A-Za-z0-9][\w.-]*) exited\b"),
    re.compile(
        r"\bdaemon\s*:\s*\[(?:\[[\d,]+\],\d+|[\w.-]+@\d+,\d+)\] on node (?P<h>[A-Za-z0-9][\w.-]*)"
    ),
    re.compile(r"\bRUNNING AT (?:[\w.-]+@)?(?P<h>[A-Za-z0-9][\w.-]*)\s*$"),
    # LBNL NHC (mej/nhc 9c4a38c0c9f4) about the node it drains: helpers/node-mark-offline's
    # "`date` $0 $*" (the host, then the note) and "$0:  Marking $STATUS $HOSTNAME offline:";
    # nhc's die() for SGE: "$HOSTNAME:diagnosis:NHC: $*"
    re.compile(r"\bnode-mark-offline(?::\s+Marking \S+)? " + _H + r" \S"),
    re.compile(r"^\s*" + _H + r":diagnosis:NHC: "),
)
