"""Round fourteen: Ray's node marked dead in each of its wordings, PRRTE's lost remote daemon and
slurmstepd's "slurmstepd-<node>:" prefix. Every line is built from the emitter's own format
string (cited in correlator/rules/emitters/ray.json, mpi.json and correlator/explain/hosts.py)
with made-up values, never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_ID = "8f205b12643d25d8c1ce57c45527a6c912f3479765096718ad2bf0d3"
_TAIL = "has missed too many heartbeats from it."

# Ray's GCS (gcs_node_manager.cc) and, before it, the raylet monitor (monitor.cc): each wording
# with the host it names (None: a node or client id names no host)
RAY_MARKED_DEAD = [
    (f"The node with client ID {_ID} has been marked dead because the monitor {_TAIL}", None),
    (f"The node with node ID {_ID} has been marked dead because the monitor {_TAIL}", None),
    (f"The node with node id {_ID} has been marked dead because the detector {_TAIL}", None),
    (
        f"The node with node id: {_ID} and ip: 10.40.7.21 has been marked dead because the "
        f"detector {_TAIL} This can happen when a raylet crashes unexpectedly or has lagging "
        "heartbeats.",
        "10.40.7.21",
    ),
    (
        f"The node with node id: {_ID} and address: 10.40.7.22 and node name: 10.40.7.22 has "
        f"been marked dead because the detector {_TAIL} This can happen when a \t(1) raylet "
        "crashes unexpectedly (OOM, preempted node, etc.) ",
        "10.40.7.22",
    ),
    (
        f"The node with node id: {_ID} and address: 10.40.7.23 has been marked dead because "
        f"the detector {_TAIL}",
        "10.40.7.23",
    ),
]


@pytest.mark.parametrize(("message", "host"), RAY_MARKED_DEAD)
def test_ray_node_marked_dead_is_a_lost_node_in_every_wording(
    message: str, host: str | None
) -> None:
    text = (
        f"2024-05-02 10:11:12,345\tWARNING worker.py:1829 -- {message}\n"
        "(BackendExecutor pid=51, ip=10.40.7.9) 2024-05-02 10:11:12,400\tERROR utils.py:42 -- "
        "The actor died unexpectedly before finishing this task.\n"
        "ray.exceptions.RayTaskError: ray::train() (pid=51, ip=10.40.7.9)\n"
    )
    got = explain_text(text)
    # the actor and the task died of the node's loss: the surviving driver's host is no culprit
    assert (got.category, got.blame, got.node) == ("node", "node", host)


def test_ray_heartbeat_wording_of_another_system_is_not_a_ray_node() -> None:
    got = explain_text("The node with node id 7 has been marked dead by the operator.\n")
    assert got.category is None


# PRRTE src/mca/errmgr/base/help-errmgr-base.txt [node-died]; ORTE names a daemon
# "[[jobfam,0],vpid]", PRRTE "[<nspace>@0,vpid]"
_PRTE_LOST = """\
--------------------------------------------------------------------------
PRTE has lost communication with a remote daemon.

  HNP daemon   : [prterun-cn0101-4242@0,0] on node cn0101
  Remote daemon: [prterun-cn0101-4242@0,3] on node cn0417

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself.
--------------------------------------------------------------------------
"""
# prterun's [prun:proc-exit-no-sync] for a rank that the lost daemon took with it
_PRTE_EXIT = """\
prterun has exited due to process rank 12 with PID 0 on node cn0417 exiting
improperly. There are three reasons this could occur:
"""


def test_prrte_lost_remote_daemon_names_the_remote_node_not_the_hnp() -> None:
    got = explain_text(_PRTE_LOST)
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "cn0417")


def test_prrte_rank_exit_after_a_lost_daemon_is_the_daemons_loss() -> None:
    got = explain_text(_PRTE_LOST + _PRTE_EXIT)
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "cn0417")


def test_a_rank_exiting_improperly_alone_stays_the_jobs_own_exit() -> None:
    got = explain_text(_PRTE_EXIT)
    assert (got.category, got.blame, got.node) == ("user_code", "job", "cn0417")


# slurmstepd's argv0 "slurmstepd-%s" with conf->node_name (src/slurmd/slurmstepd/mgr.c)
@pytest.mark.parametrize("node", ["gpu20-15", "cn0417", "node-a.cluster"])
def test_slurmstepd_prefix_names_the_node_after_the_dash(node: str) -> None:
    text = (
        f"slurmstepd-{node}: error: Detected 1 oom-kill event(s) in StepId=77.0. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.\n"
        f"srun: error: {node}: task 0: Out Of Memory\n"
        f"slurmstepd-{node}: error: *** STEP 77.0 ON {node} CANCELLED AT 2024-05-02T10:11:12 ***\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("oom_host", "job", node)


def test_a_host_named_slurmstepd_something_else_keeps_its_whole_name() -> None:
    # only the prefix "slurmstepd-" is slurmstepd's own; a node called "stepd-07" is a host
    text = (
        "stepd-07: [2024-05-02 10:11:12] kernel: Out of memory: Killed process 4242 (python) "
        "total-vm:1000kB, anon-rss:900kB, file-rss:0kB, shmem-rss:0kB\n"
    )
    assert explain_text(text).node == "stepd-07"
