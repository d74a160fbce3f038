"""slurmd's 'Prolog hung on node <name>' (round forty-five's training miss 1000).

Source (correlator/rules/emitters/slurm.json, rule slurm_prolog_hung): SchedMD/slurm
src/slurmd/common/slurmd_common.c @ 01151b4c, _prolog_timer: when the prolog that run_prolog
started is still running MessageTimeout-2 seconds later, slurmd notifies the job with
snprintf("Prolog hung on node %s", conf->node_name), its own node name; srun and slurmstepd print
it as an error. The node's prolog is stuck there: node/node, on the node the line names, unless
the name is a reporter's placeholder (correlator/rules/hosts.py).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.rules.hosts import placeholder_name


@pytest.mark.parametrize(
    ("text", "node"),
    [
        ("srun: error: Prolog hung on node gpu-a017\n", "gpu-a017"),
        ("slurmstepd: error: Prolog hung on node dgx12.cluster.local\n", "dgx12.cluster.local"),
        ("slurmstepd: error: Prolog hung on node worker-X\n", None),
    ],
)
def test_a_hung_prolog_is_the_named_nodes_fault(text: str, node: str | None) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", node), got.explanation


@pytest.mark.parametrize(
    "text",
    [
        "prolog for job 4242 ran for 31 seconds\n",
        "Prolog hung on node\n",
    ],
)
def test_a_slow_prolog_note_or_a_line_naming_no_node_is_no_hung_prolog(text: str) -> None:
    assert explain_text(text).category is None


@pytest.mark.parametrize(
    ("value", "masked"),
    [("worker-X", True), ("node-X", True), ("worker-X1", False), ("gpu-x", False)],
)
def test_a_lone_capital_x_label_after_a_name_is_a_placeholder(value: str, masked: bool) -> None:
    assert placeholder_name(value) is masked
