"""Metamorphic: a log pasted in part, as people paste logs into issues, keeps its verdict.

Each training case explain gets right is cut down to what someone pasting it might keep: its
TAIL, from a few lines above the first line explain quotes as evidence to the end (a paste that
starts mid-log, cut at a line boundary), and its EXCERPT, the quoted lines with a few lines of
context each side and a "..." line where the pieces are not adjacent (an elided paste). The cut
text must keep the category and blame, and the culprit node while every evidence line naming
the culprit is kept (always here, as both cuts keep every quoted line). A verdict that rests on
a line explain does not quote (a header naming the host, a table's header) is a finding: the
evidence quotes what the verdict rests on (correlator/explain/evidence.py), and what it cannot
is listed in SKIPPED with the reason. Only training cases are read; their texts are never
printed (ids are file names).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from correlator.explain import explain_text
from tests.correlator.corpus_open import KNOWN_TRAINING_MISSES, OPEN_ROUNDS
from tests.correlator.metamorphic_params import variant_params
from tests.correlator.test_explain_corpus import CORPUS, TRAINING

# Cases whose verdict is wrong are left out (a metamorphic test of a wrong answer would freeze
# the error), and so are those with nothing to explain (no evidence to cut around).
CHECKED = [
    c
    for c in TRAINING
    if c["file"] not in KNOWN_TRAINING_MISSES
    and c["file"] not in OPEN_ROUNDS
    and c["category"] is not None
]
TAIL_LINES_ABOVE = 3  # the paste starts a few lines above the first quoted line
CONTEXT = 2  # lines kept each side of a quoted line in an excerpt
ELIDED = "..."

# (case file, cut) pairs whose cut loses what the verdict needs, each with the reason.
SKIPPED: dict[tuple[str, str], str] = {
    ("637_gke-serial-console-json-node-invoked-oom-killer.txt", "excerpt"): (
        "a Cloud Logging JSON record pasted whole: the culprit is the record's resource_name "
        "label, which explain quotes, but elided with '...' the record is no longer JSON, so no "
        "line of it is read as that record's host"
    ),
}


def _line_of(lines: list[str], quoted: str) -> int | None:
    """The index of the line the evidence line `quoted` is (or is in: an escape left out)."""
    exact = next((i for i, ln in enumerate(lines) if ln == quoted), None)
    return (
        exact
        if exact is not None
        else next((i for i, ln in enumerate(lines) if quoted in ln), None)
    )


def tail(lines: list[str], quoted: list[int]) -> list[str]:
    """The paste from TAIL_LINES_ABOVE lines above the first quoted line to the end."""
    return lines[max(0, min(quoted) - TAIL_LINES_ABOVE) :]


def excerpt(lines: list[str], quoted: list[int]) -> list[str]:
    """The quoted lines with CONTEXT lines each side, ELIDED between pieces that do not touch."""
    spans: list[list[int]] = []
    for i in sorted(set(quoted)):
        lo, hi = max(0, i - CONTEXT), min(len(lines), i + CONTEXT + 1)
        if spans and lo <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], hi)
        else:
            spans.append([lo, hi])
    out: list[str] = []
    for lo, hi in spans:
        out += [ELIDED, *lines[lo:hi]] if out else lines[lo:hi]
    return out


CUTS: dict[str, Callable[[list[str], list[int]], list[str]]] = {"tail": tail, "excerpt": excerpt}


def _names(line: str, host: str) -> bool:
    # a whole name: "node1" is not named by "node10"
    return re.search(rf"(?<![\w.-]){re.escape(host)}(?!\w)", line, re.IGNORECASE) is not None


@cache
def _original(file: str) -> tuple[tuple[Any, Any, Any], tuple[str, ...]]:
    got = explain_text((CORPUS / file).read_text("utf-8"))
    return (got.category, got.blame, got.node), tuple(got.evidence)


def _right(case: dict[str, Any], verdict: tuple[Any, Any, Any]) -> bool:
    wanted = [(case["category"], case["blame"])]
    if "alternative" in case:
        wanted.append((case["alternative"]["category"], case["alternative"]["blame"]))
    node = verdict[2]
    same_node = (node or "").lower() == (case["node"] or "").lower()
    return verdict[:2] in wanted and same_node and (node is None) == (case["node"] is None)


def _cut(file: str, cut: str) -> tuple[list[str], list[str]]:
    """The cut text's lines, and the text's."""
    lines = (CORPUS / file).read_text("utf-8").splitlines()
    located = [_line_of(lines, q) for q in _original(file)[1]]
    assert located and None not in located  # every evidence line is a line of the text
    quoted = [i for i in located if i is not None]
    return CUTS[cut](lines, quoted), lines


@pytest.mark.parametrize(
    ("case", "cut"),
    variant_params(((c, name) for c in CHECKED for name in CUTS), SKIPPED),
)
def test_a_pasted_tail_or_excerpt_keeps_the_training_verdict(
    case: dict[str, Any], cut: str
) -> None:
    verdict, evidence = _original(case["file"])
    assert _right(case, verdict)  # right before the cut
    kept, whole = _cut(case["file"], cut)
    if kept == whole:
        return  # the cut kept every line: the same text (pasted from the top, or short)
    got = explain_text("\n".join(kept) + "\n")
    assert (got.category, got.blame) == verdict[:2]
    node = verdict[2]
    naming = [q for q in evidence if node and _names(q, node)]
    if node is None or all(any(q in ln for ln in kept) for q in naming):
        assert got.node == node


@pytest.mark.parametrize("case", [c for c in CHECKED if c["node"]], ids=lambda c: c["file"])
def test_the_evidence_quotes_a_line_naming_the_culprit(case: dict[str, Any]) -> None:
    # a culprit read from a header, a table's host column or a block's owner is shown, so an
    # excerpt of the evidence keeps what names it
    (_, _, node), evidence = _original(case["file"])
    assert node and any(_names(q, node) for q in evidence)


def test_the_cuts_cut_at_line_boundaries_and_mark_what_they_elide() -> None:
    lines = [f"line {i}" for i in range(20)]
    assert tail(lines, [10, 15]) == lines[7:]
    assert tail(lines, [1]) == lines
    got = excerpt(lines, [5, 6, 15])
    assert got == [*lines[3:9], ELIDED, *lines[13:18]]
    assert excerpt(lines, [0, 19]) == [*lines[0:3], ELIDED, *lines[17:20]]
    assert excerpt(lines, [3, 8]) == lines[1:11]  # touching pieces are not elided
