"""bench explain's per-case scoring: how a culprit is missed, and a host named without warrant."""

from __future__ import annotations

from typing import Any

from benchmarks.explain import figures_of, score_case


def _case(node: str | None, category: str | None = "interconnect") -> dict[str, Any]:
    return {"category": category, "blame": "unknown", "node": node}


def _got(node: str | None, category: str | None = "interconnect") -> dict[str, Any]:
    return {"category": category, "blame": "unknown", "node": node}


def test_a_named_culprit_missed_counts_as_unnamed_or_as_another_host() -> None:
    outcomes = [
        score_case(_case("gpu-07"), _got("GPU-07")),  # hit: host names compare without case
        score_case(_case("gpu-07"), _got(None)),
        score_case(_case("gpu-07"), _got("gpu-08")),
        score_case(_case("gpu-07"), _got("gpu-09")),
        score_case(_case("gpu-07"), _got(None, category=None)),  # nothing recognised at all
    ]
    figures = figures_of(outcomes)
    assert figures["culprit_named"] == 5 and figures["culprit_accuracy"] == 0.2
    assert (figures["culprit_missed_unnamed"], figures["culprit_missed_other"]) == (2, 2)
    assert figures["culprit_missed_unrecognised"] == 1
    assert figures["culprit_unwarranted"] == 0


def test_a_host_named_where_the_label_names_none_is_unwarranted_only_for_a_failure() -> None:
    outcomes = [
        score_case(_case(None), _got("gpu-07")),
        score_case(_case(None), _got(None)),
        score_case(_case(None, category=None), _got("gpu-07", category=None)),  # nothing to explain
    ]
    figures = figures_of(outcomes)
    assert figures["culprit_unwarranted"] == 1
    assert (figures["culprit_named"], figures["culprit_missed_unnamed"]) == (0, 0)
