"""Probe set twenty-nine (ClusterShell): clush's report of the node whose remote command failed.

Read from cea-hpc/clustershell @c09f82763b2b lib/ClusterShell/CLI/Clush.py: "clush: %s: exited
with exit code %d" (the node, or a folded nodeset when several nodes share the code; the remote
command's status as ssh relays it, 255 being ssh's own failure per openssh ssh.1 EXIT STATUS).
The node named is the one to read, never the host clush ran on; a folded nodeset names no one
node; "command timeout" is left unread. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

CLUSH = "cea-hpc/clustershell lib/ClusterShell/CLI/Clush.py@c09f82763b"

FORMATS = (
    Fmt(
        "clush-ssh-255",
        CLUSH,
        "clush: {host}: exited with exit code 255\n",
        {"host": HOSTS},
        ("node", "node"),
        culprit="host",
    ),
    Fmt(
        "clush-exit-code",
        CLUSH,
        "clush: {host}: exited with exit code {c}\n",
        {"host": HOSTS, "c": (1, 2, 139, 134)},
        ("user_code", "job"),
        culprit="host",
    ),
    # 137: a remote shell's report of SIGKILL, which the signal reasoner reads
    Fmt(
        "clush-exit-sigkill",
        CLUSH,
        "clush: {host}: exited with exit code 137\n",
        {"host": HOSTS[:3]},
        ("oom_host", "unknown"),
        culprit="host",
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_clush_exit_report_names_the_node_it_reports(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


@pytest.mark.parametrize(
    "line",
    ["clush: gpu[01-04]: exited with exit code 1", "clush: node0412: command timeout"],
)
def test_a_folded_nodeset_or_a_command_timeout_names_no_node(line: str) -> None:
    assert explain_text(line + "\n").node is None


_VICTIM = (
    "Nov 29 10:00:01 gpu-a-07 python[4411]: [E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)


@pytest.mark.parametrize("clush_first", [True, False])
def test_the_unreachable_node_is_named_never_the_node_that_timed_out(clush_first: bool) -> None:
    clush = "clush: node0412: exited with exit code 255\n"
    got = explain_text(clush + _VICTIM if clush_first else _VICTIM + clush)
    assert (got.category, got.blame, got.node) == ("node", "node", "node0412"), got.explanation
