"""Probe set twenty-nine (PBS): the mother superior's report of a sister node it lost.

Read from adaptivecomputing/torque @34ff845417cc src/resmom/mom_main.c (job_over_limit: "node %d
(%s) requested job terminate, '%s' (code %d) - received SISTER_EOF attempting to communicate
with sister MOM's" for SISTER_EOF, 1099 in src/include/pbs_job.h, and "... - internal or
network failure attempting to communicate with sister MOM's" otherwise; the job's stderr gets
it as "=>> PBS: job killed: %s\\n") and openpbs/openpbs @cd7ab5edaf03 src/resmom/mom_main.c
("node EOF %d (%s)" in the MOM's log, the job killed for rerun). The sister node named is the
one the job lost; the mother superior that wrote the line, and a rank that timed out, are not.
Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

TORQUE = "adaptivecomputing/torque src/resmom/mom_main.c@34ff845417"
OPENPBS = "openpbs/openpbs src/resmom/mom_main.c@cd7ab5edaf"
NODE = ("node", "node")
# pbs_mom's log line (log_record: date;event;"PBS_MOM";"Job";job id;message) or the job's stderr
_MOM_LOG = "11/29/2026 10:00:01;0008;   pbs_mom.4411;Job;{job};"
_PREFIXES = ("=>> PBS: job killed: ", _MOM_LOG, "")
_JOBS = {"job": ("1234.pbs-server", "77.head01.cluster")}

FORMATS = (
    Fmt(
        "torque-sister-eof",
        TORQUE,
        "node {n} ({host}) requested job terminate, 'EOF' (code 1099) - received SISTER_EOF "
        "attempting to communicate with sister MOM's\n",
        {"n": (18, 1, 3), "host": HOSTS, **_JOBS},
        NODE,
        culprit="host",
        prefixes=_PREFIXES,
    ),
    Fmt(
        "torque-sister-network",
        TORQUE,
        "node {n} ({host}) requested job terminate, 'EOF' (code {code}) - internal or network "
        "failure attempting to communicate with sister MOM's\n",
        {"n": (2, 7), "host": HOSTS, "code": (1001, 15020), **_JOBS},
        NODE,
        culprit="host",
        prefixes=_PREFIXES,
    ),
    Fmt(
        "openpbs-node-eof",
        OPENPBS,
        "node EOF {n} ({host})\n",
        {"n": (1, 5), "host": HOSTS, **_JOBS},
        NODE,
        culprit="host",
        prefixes=("11/29/2026 10:00:01;0008;pbs_mom;Job;{job};",),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_lost_sister_mom_blames_the_sister_node(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


# The job's stderr from the mother superior: an MPI rank there timed out on the lost peer
# (Open MPI's "[host:pid]" prefix), then PBS killed the job naming the sister.
_VICTIM = (
    "[gpu-a-07:31337] [[4523,0],0] ORTE_ERROR_LOG: Timeout in file base/plm_base_launch_support.c"
    " at line 1021\n"
)
_KILLED = (
    "=>> PBS: job killed: node 18 (n314) requested job terminate, 'EOF' (code 1099) - received "
    "SISTER_EOF attempting to communicate with sister MOM's\n"
)


def test_the_sister_is_blamed_not_the_mother_superiors_timed_out_rank() -> None:
    got = explain_text(_VICTIM + _KILLED + "mpirun: Forwarding signal 10 to job\n")
    assert (got.category, got.blame, got.node) == ("node", "node", "n314"), got.explanation


@pytest.mark.parametrize(
    "line",
    [
        "node 3 (gpu-b-03) requested job terminate, 'killdone' (1000)",
        "node 3 (gpu-b-03) requested job terminate, 'badpoll' (code 1001)",
    ],
)
def test_a_sister_that_finished_or_answered_a_poll_badly_shows_no_fault(line: str) -> None:
    # 'killdone' is the sister's tasks ending (their own output says why); 'badpoll' a poll
    # reply the source does not explain: neither is read as the node's fault
    got = explain_text(f"=>> PBS: job killed: {line}\n")
    assert (got.category, got.blame, got.node) == (None, "unknown", None), got.explanation


def test_the_mother_superiors_timed_out_rank_alone_is_not_blamed() -> None:
    assert explain_text(_VICTIM).node is None
