"""Round thirty: two emitters' formats, as their sources print them.

- sinfo -R (SchedMD/slurm src/sinfo/opts.c) prints the REASON column 20 characters wide
  ("reason:20 ,user:9 ,timestamp:19 ,nodelist:0"; with --long a STATE column comes before the
  NODELIST), so slurmctld's longer drain reasons show cut: "gres/gpu count reported lower than
  configured (0 < 4)" (src/interfaces/gres.c) as "gres/gpu count repor", "Low socket*core*thread
  count" and "Node unexpectedly rebooted" (src/slurmctld/node_mgr.c) as "Low socket*core*thre"
  and "Node unexpectedly re": a node that failed a check, node/node, the row's NODELIST naming it
  (none when several rows name several nodes). See slurm.json (sinfo_reason_row_truncated).
- the raylet exits when the GCS declares its own node dead (ray-project/ray
  src/ray/raylet/node_manager.cc): "[Timeout] Exiting because this node manager has mistakenly
  been marked as dead by the GCS: ...", older "... marked dead by the monitor." and Ray 1.x's
  "This node has beem marked as dead." (sic): the node lost, node/node. See ray.json
  (ray_raylet_marked_dead_self).
Never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_HEAD = "REASON               USER      TIMESTAMP           NODELIST"
_LONG_HEAD = "REASON               USER         TIMESTAMP           STATE  NODELIST"


@pytest.mark.parametrize(
    "reason",
    (
        "gres/gpu count repor",
        "Low socket*core*thre",
        "Node unexpectedly re",
        "batch job complete f",
    ),
)
def test_a_cut_sinfo_reason_on_one_node_blames_that_node(reason: str) -> None:
    row = f"{reason} slurm     2026-01-02T03:04:05 gpu07"
    got = explain_text(f"{_HEAD}\n{row}\n")
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu07")


def test_a_typed_gres_reason_cut_after_count_still_reads_as_the_node_failing_its_check() -> None:
    row = "gres/gpu:a100 count  slurm     2026-01-02T03:04:05 gpu07"
    got = explain_text(f"{_HEAD}\n{row}\n")
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu07")


def test_the_long_format_with_its_state_column_reads_the_same() -> None:
    row = "Low socket*core*thre root         2019-05-07T18:16:10 drain  cn042"
    got = explain_text(f"{_LONG_HEAD}\n{row}\n")
    assert (got.category, got.blame, got.node) == ("node", "node", "cn042")


def test_two_nodes_drained_alike_name_no_node() -> None:
    rows = [
        "gres/gpu count repor slurm     2026-01-02T03:04:05 gpu07",
        "gres/gpu count repor slurm     2026-01-02T03:04:06 gpu08",
    ]
    got = explain_text("\n".join([_HEAD, *rows]) + "\n")
    assert (got.category, got.blame, got.node) == ("node", "node", None)


def test_a_reason_word_in_prose_is_not_a_sinfo_row() -> None:
    got = explain_text("the gres/gpu count reported by the node looked fine to me\n")
    assert got.category is None


@pytest.mark.parametrize(
    "line",
    (
        "[2025-06-23 12:00:00,000 C 89 89] node_manager.cc:1000: [Timeout] Exiting because this "
        "node manager has mistakenly been marked as dead by the GCS: GCS failed to check the "
        "health of this node for 5 times. This is likely because the machine or raylet has "
        "become overloaded.",
        "[2020-08-27 12:00:00,000 C 9 9] node_manager.cc:772: Exiting because this node manager "
        "has mistakenly been marked dead by the monitor.",
        "[2021-06-01 10:00:00,000 C 149 149] node_manager.cc:170: This node has beem marked as "
        "dead.",
    ),
)
def test_a_raylet_exiting_because_its_node_was_declared_dead_is_a_node_fault(line: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame, got.node) == ("node", "node", None)


def test_the_raylet_heartbeat_warning_alone_is_no_failure() -> None:
    line = (
        "[2022-01-01 00:00:00,000 W 1 2] node_manager.cc:157: Last heartbeat was sent 900 ms ago. "
        "There might be resource pressure on this node. If heartbeat keeps lagging, this node "
        "can be marked as dead mistakenly."
    )
    assert explain_text(line + "\n").category is None
