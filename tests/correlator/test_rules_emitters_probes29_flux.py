"""Probe set twenty-nine (Flux): the job-exec exceptions that name the node a job lost.

Read from flux-framework/flux-core @4a5e79f56b85: src/modules/job-exec/bulkexec.c error_cb
(EHOSTUNREACH from a job shell's broker: "node failure on %s (shell rank %d)" raised as
type=node-failure, "node failure on %s (rank %d)" as the fatal type=exec exception; ENOSYS:
"%s service is not loaded on %s (rank %d)"; other errors "job shell exec error on broker %s
(rank %d): %s"), its exit_cb ("%s (rank%s %s) terminated before first barrier"), and
src/cmd/job/attach.c ("%.3fs: job.exception type=%s severity=%d %s", how flux run shows them);
the wording before 99b98d6c07c5 (src/modules/job-exec/exec.c @2786bc934332): "lost contact with
job shell on %s (shell rank %d)" / "lost contact with job shell on broker %s (rank %d)". The
host a lost broker ran on is the node to blame; a rank that only timed out waiting for it
never is. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

EXEC = "flux-framework/flux-core src/modules/job-exec/bulkexec.c@4a5e79f56b"
OLD = "flux-framework/flux-core src/modules/job-exec/exec.c@2786bc9343"
# flux run / flux job attach: the exception's elapsed time, type and severity, then its note
_ATTACH = ("{t}s: job.exception type={type} severity={sev} ", "")
_T = {"t": ("0.512", "1204.377", "37.020")}
NODE = ("node", "node")
NODE_UNKNOWN = ("node", "unknown")

FORMATS = (
    Fmt(
        "exec-node-failure",
        EXEC,
        "node failure on {host} (rank {r})\n",
        {**_T, "host": HOSTS, "r": (3, 1, 127), "type": ("exec",), "sev": (0,)},
        NODE,
        culprit="host",
        prefixes=_ATTACH,
    ),
    Fmt(
        "exec-node-failure-shell",
        EXEC,
        "node failure on {host} (shell rank {r})\n",
        {**_T, "host": HOSTS, "r": (3, 1), "type": ("node-failure",), "sev": (2,)},
        NODE,
        culprit="host",
        prefixes=_ATTACH,
    ),
    Fmt(
        "exec-lost-contact-broker",
        OLD,
        "lost contact with job shell on broker {host} (rank {r})\n",
        {**_T, "host": HOSTS, "r": (3, 12), "type": ("exec",), "sev": (0,)},
        NODE,
        culprit="host",
        prefixes=_ATTACH,
    ),
    Fmt(
        "exec-lost-contact-shell",
        OLD,
        "lost contact with job shell on {host} (shell rank {r})\n",
        {**_T, "host": HOSTS, "r": (2, 7), "type": ("node-failure",), "sev": (2,)},
        NODE,
        culprit="host",
        prefixes=_ATTACH,
    ),
    Fmt(
        "exec-before-barrier",
        EXEC,
        "{host} (rank {r}) terminated before first barrier\n",
        {**_T, "host": HOSTS, "r": (3, 0, 15), "type": ("exec",), "sev": (0,)},
        NODE_UNKNOWN,
        culprit="host",
        prefixes=_ATTACH,
    ),
    Fmt(
        "exec-shell-exec-error",
        EXEC,
        "job shell exec error on broker {host} (rank {r}): {cmd}\n",
        {
            **_T,
            "host": HOSTS,
            "r": (3, 9),
            "cmd": ("/usr/libexec/flux/cmd/flux-imp", "/usr/libexec/flux/flux-shell"),
            "type": ("exec",),
            "sev": (0,),
        },
        NODE_UNKNOWN,
        culprit="host",
        prefixes=_ATTACH,
    ),
    Fmt(
        "exec-service-not-loaded",
        EXEC,
        "{svc} service is not loaded on {host} (rank {r})\n",
        {**_T, "host": HOSTS, "r": (3, 4), "svc": ("sdexec", "rexec"), "type": ("exec",)},
        NODE_UNKNOWN,
        culprit="host",
        prefixes=("{t}s: job.exception type={type} severity=0 ", ""),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_flux_job_exec_exception_blames_the_node_it_names(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


def test_several_ranks_terminated_before_the_barrier_name_no_single_node() -> None:
    # exit_cb names the ranks' hosts as a hostlist when several shells exited
    text = (
        "0.9s: job.exception type=exec severity=0 gpu[3-4] (ranks 3-4) terminated before first "
        "barrier\n"
    )
    assert explain_text(text).node is None


# A rank of the job on another host times out waiting for the lost one (torch's watchdog, in
# its host's journal): it printed the timeout, it is not the node that failed.
VICTIM = (
    "Nov 29 10:00:01 gpu-a-07 python[4411]: [E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)


@pytest.mark.parametrize(
    "note",
    [
        "node failure on node0412 (rank 3)",
        "lost contact with job shell on broker node0412 (rank 3)",
        "lost contact with job shell on node0412 (shell rank 3)",
    ],
)
@pytest.mark.parametrize("victim_first", [True, False])
def test_the_lost_broker_is_blamed_never_the_rank_that_timed_out(
    note: str, victim_first: bool
) -> None:
    exc = f"612.004s: job.exception type=exec severity=0 {note}\n"
    got = explain_text(VICTIM + exc if victim_first else exc + VICTIM)
    assert (got.category, got.blame, got.node) == ("node", "node", "node0412"), got.explanation


def test_the_timed_out_rank_alone_is_not_blamed() -> None:
    assert explain_text(VICTIM).node is None
