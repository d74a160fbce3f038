"""Probe set twenty-nine (Slurm's PMIx plugin): the node one slurmstepd could not connect to.

Read from SchedMD/slurm @284c3b95f08a: src/plugins/mpi/pmix/pmixp_dconn.h pmixp_dconn_connect
(PMIXP_ERROR("Cannot establish direct connection to %s (%d)", nodename, nodeid), then
slurm_kill_job_step(SIGKILL)) and src/plugins/mpi/pmix/pmixp_debug.h (PMIXP_ERROR: error("
%s: %s: %s [%d]: %s:%d: " format) with the plugin type, the function, the printer's own
hostname and node id, file and line); slurmstepd's error() puts "slurmstepd: error: " in front
on the job's stderr, "[time] [step] error: " in its log file. The node named is the one not
answering; the node whose stepd printed it, and whose tasks the step's SIGKILL then ends, is not.
Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

DCONN = "SchedMD/slurm src/plugins/mpi/pmix/pmixp_dconn.h@284c3b95f0"

FORMATS = (
    Fmt(
        "pmix-direct-connect-failed",
        DCONN,
        " mpi/{plugin}: pmixp_dconn_connect_do: {me} [{myid}]: pmixp_dconn.h:245: Cannot "
        "establish direct connection to {host} ({id})\n",
        {
            "plugin": ("pmix_v4", "pmix_v3", "pmix_v5"),
            "me": ("gpu-a-01", "nid000017"),
            "myid": (0, 3),
            "host": HOSTS,
            "id": (1, 12, 127),
            "step": ("1234.0", "77.batch"),
        },
        ("interconnect", "unknown"),
        culprit="host",
        prefixes=("slurmstepd: error: ", "[2026-11-29T10:00:01.123] [{step}] error: "),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_failed_pmix_direct_connection_names_the_node_it_could_not_reach(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


_FAILED = (
    "slurmstepd: error:  mpi/pmix_v4: pmixp_dconn_connect_do: gpu-a-07 [0]: pmixp_dconn.h:245: "
    "Cannot establish direct connection to node0412 (1)\n"
)
# the step killed on the printing node, as srun reports it
_KILLED = "srun: error: gpu-a-07: tasks 0-7: Killed\nsrun: Terminating StepId=1234.0\n"


@pytest.mark.parametrize("killed_first", [True, False])
def test_the_unreachable_node_is_named_not_the_node_whose_step_was_killed(
    killed_first: bool,
) -> None:
    got = explain_text(_KILLED + _FAILED if killed_first else _FAILED + _KILLED)
    assert (got.category, got.node) == ("interconnect", "node0412"), got.explanation
