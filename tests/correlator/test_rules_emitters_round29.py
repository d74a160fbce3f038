"""Round twenty-nine: the TORQUE (PBS) server failing to start a job on its execution node, as
its job log prints it.

The server's run-job path (adaptivecomputing/torque src/server/req_runjob.c) logs against the
job "unable to run job, send to MOM '%s' failed" when sending the job to the MOM at that address
fails (send_job_to_mom; its unit test pins "unable to run job, send to MOM '10.1.4.4' failed"),
and finish_sendmom logs "unable to run job, MOM rejected/timeout" when the connection to the MOM
timed out (the server then marks the node down through stream_eof) and
"unable to run job, MOM rejected/rc=%d" when the MOM refused the job; the job is requeued. These
are the execution node's faults, not the job's: node/node, the MOM's address naming the node when
one is given, none when several MOMs fail alike. See correlator/rules/emitters/slurm.json
(torque_server_mom_unreachable). Never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_AT = "06/14/2021 03:12:09  S    "


@pytest.mark.parametrize("mom", ("10.1.4.4", "cn042"))
def test_a_job_the_server_could_not_send_to_its_mom_blames_that_node(mom: str) -> None:
    got = explain_text(f"{_AT}unable to run job, send to MOM '{mom}' failed\n")
    assert (got.category, got.blame, got.node) == ("node", "node", mom)


@pytest.mark.parametrize("outcome", ("timeout", "rc=-1", "rc=15010"))
def test_a_mom_that_timed_out_or_refused_the_job_is_a_node_fault_with_no_node_named(
    outcome: str,
) -> None:
    got = explain_text(f"{_AT}unable to run job, MOM rejected/{outcome}\n")
    assert (got.category, got.blame, got.node) == ("node", "node", None)


def test_two_moms_failing_in_turn_name_no_node() -> None:
    lines = [
        f"{_AT}unable to run job, MOM rejected/timeout",
        f"{_AT}unable to run job, send to MOM '10.1.4.4' failed",
        f"{_AT}unable to run job, send to MOM '10.1.4.5' failed",
        f"{_AT}unable to run job, send to MOM '10.1.4.4' failed",
    ]
    got = explain_text("\n".join(lines) + "\n")
    assert (got.category, got.blame, got.node) == ("node", "node", None)


def test_the_job_log_naming_the_mom_quotes_the_server_line_as_evidence() -> None:
    line = f"{_AT}unable to run job, send to MOM 'cn042' failed"
    got = explain_text(line + "\n").to_dict()
    assert line in got["evidence"]
