"""Metamorphic: healthy hosts printing beside the failing one must not move the culprit.

A real multi-node log holds the other hosts' lines too: their NCCL init, their syslog, their
training steps, their rows in a status view. Every training case whose label names a node is
rewritten with healthy lines of 1-3 other hosts around and between the failing lines
(tests/correlator/neighbour_lines.py: in the style the culprit's own lines name it in, else as
the same tools name a host in a healthy run), in two variants (one neighbour; two or three).
Explain must keep the category, blame and culprit of the original text. The same selection as
the host-rename test: cases explain gets wrong are left out. Only training cases are read
here; their texts are never printed (ids are file names and variants).
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from correlator.explain import explain_text
from tests.correlator.host_rename import token
from tests.correlator.metamorphic_params import case_text, original_verdict, variant_params
from tests.correlator.neighbour_lines import neighbours, with_neighbours
from tests.correlator.test_explain_host_rename_metamorphic import NAMED

VARIANTS = (0, 1)

# (case file, variant) pairs that still lose their culprit among healthy neighbours, with why.
SKIPPED: dict[tuple[str, int], str] = {}


@pytest.mark.parametrize(
    ("case", "variant"),
    variant_params(((c, v) for c in NAMED for v in VARIANTS), SKIPPED),
)
def test_the_culprit_stays_among_healthy_neighbours(case: dict[str, Any], variant: int) -> None:
    category, blame, node = original_verdict(case["file"])
    assert (node or "").lower() == case["node"].lower()  # right before the neighbours came
    changed = with_neighbours(case_text(case["file"]), case["file"], case["node"], variant)
    got = explain_text(changed)
    assert (got.category, got.blame, (got.node or "").lower()) == (category, blame, node.lower())


@pytest.mark.parametrize("case", NAMED, ids=[c["file"] for c in NAMED])
def test_the_neighbours_are_other_hosts_and_the_failing_lines_stay(case: dict[str, Any]) -> None:
    # every original line is still there in order, each neighbour is named and none is the
    # culprit (booleans only: a failing assert must not print the text)
    text = case_text(case["file"])
    for variant in VARIANTS:
        out = with_neighbours(text, case["file"], case["node"], variant)
        added = out.splitlines()
        kept = iter(added)
        assert all(any(ln == got for got in kept) for ln in text.splitlines()), variant
        assert len(added) > len(text.splitlines()), variant
        assert len(re.findall(token(case["node"]), out)) == len(
            re.findall(token(case["node"]), text)
        ), variant


def test_neighbours_follow_the_culprits_naming_and_are_new() -> None:
    text = "gpu004 failed; gpu011 is busy"
    got = neighbours("gpu004", text, 3, random.Random(1))
    assert len(set(got)) == 3
    assert all(re.fullmatch(r"gpu\d{3}", h) and h not in text for h in got)
    addresses = neighbours("10.1.2.3", "peer 10.1.2.3", 2, random.Random(2))
    assert all(re.fullmatch(r"10\.1\.2\.\d+", a) and a != "10.1.2.3" for a in addresses)
    fqdn = neighbours("node008.cm.cluster", "node008", 1, random.Random(3))
    assert re.fullmatch(r"node\d{3}\.cm\.cluster", fqdn[0]) and not fqdn[0].startswith("node008")
