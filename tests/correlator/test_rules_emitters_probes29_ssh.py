"""Probe set twenty-nine (OpenSSH keepalive): the server an open ssh session stopped hearing from.

Read from openssh/openssh-portable @04569be91afb clientloop.c server_alive_check: once
ServerAliveCountMax keepalives go unanswered, logit("Timeout, server %s not responding.", host)
and exit 255. The launchers that run ranks over ssh (pdsh, which relays it behind "host: ",
chaos/pdsh src/pdsh/dsh.c; mpirun's rsh agent; DeepSpeed's and accelerate's multinode runners)
show it on the launching host: the server named is the node that hung or went down, the host
that ran ssh is not. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

SSH = "openssh/openssh-portable clientloop.c@04569be91a"
NODE = ("node", "node")

FORMATS = (
    Fmt(
        "ssh-server-alive-timeout",
        SSH,
        "Timeout, server {host} not responding.\n",
        {"host": (*HOSTS, "10.4.0.17", "node0412.cluster.example.org")},
        NODE,
        culprit="host",
        # as ssh writes it; behind pdsh's "host: " (the ssh to that host relays it); in a
        # DeepSpeed runner log line's tail
        prefixes=("", "{host}: ", "[2026-11-29 10:00:01,269] [INFO] [runner.py:568:main] "),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_an_ssh_keepalive_timeout_blames_the_server_it_names(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


# The launching host's own rank timed out on the collective the lost node never joined
_VICTIM = (
    "gpu-a-07:3117:3190 [0] NCCL INFO comm 0x5581 rank 0 nranks 16 cudaDev 0 busId 1b000 - "
    "Abort COMPLETE\n"
    "Nov 29 10:00:01 gpu-a-07 python[4411]: [E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)


@pytest.mark.parametrize("ssh_first", [True, False])
def test_the_silent_server_is_blamed_never_the_host_that_timed_out(ssh_first: bool) -> None:
    ssh = "node0412: Timeout, server node0412 not responding.\n"
    got = explain_text(ssh + _VICTIM if ssh_first else _VICTIM + ssh)
    assert (got.category, got.blame, got.node) == ("node", "node", "node0412"), got.explanation


def test_the_host_that_timed_out_alone_is_not_blamed() -> None:
    assert explain_text(_VICTIM).node is None
