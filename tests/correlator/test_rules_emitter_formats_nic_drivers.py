"""Probe set twenty-two, NIC drivers: mlx5_core port module events, firmware health and command
timeouts, AWS EFA admin-queue timeouts and Broadcom bnxt_re firmware timeouts, under dmesg,
dmesg -T, journalctl -k, syslog and dmesg typed at a root prompt.

The formats, their sources (torvalds/linux paths and commits) and the verdicts the corpus
README's policy gives them are in tests/correlator/nic_driver_formats.py. Each format is filled
with each of its value sets and each set is delivered five ways; the host is the journal's or
syslog's host field or the prompt's host running dmesg, and plain dmesg and dmesg -T name none.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.nic_driver_formats import NIC_FAULTS, NIC_QUIET, probes


@pytest.mark.parametrize(("text", "want", "node"), list(probes(NIC_FAULTS)))
def test_a_nic_driver_fault_reads_as_the_policy_says_on_the_host_that_logged_it(
    text: str, want: tuple[str | None, str], node: str | None
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == want, (text, got.explanation)
    assert got.node == node, (text, got.node)


@pytest.mark.parametrize(("text", "want", "node"), list(probes(NIC_QUIET)))
def test_an_informational_or_refused_nic_driver_line_is_nothing_to_blame(
    text: str, want: tuple[str | None, str], node: str | None
) -> None:
    got = explain_text(text)
    assert got.blame != "node", (text, got.category, got.explanation)
    assert (got.category, got.blame) == want, (text, got.explanation)
