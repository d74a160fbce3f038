"""Metamorphic: the culprit `explain` names follows the host, whatever the cluster calls it.

Every training case whose label names a node is rewritten with its hosts renamed to another
real naming convention (tests/correlator/host_rename.py: AWS ParallelCluster, EC2, GKE, HPE
Cray, Kubeflow pods, AKS, plain numbered nodes), the culprit and the other hosts the text names
alike, each keeping its kind (a name stays a name, an IPv4 address a private IPv4 address).
Explain must keep the category and blame of the original text and name the renamed culprit.
Only cases explain gets right are asserted on; the known misses are left out. Only training
cases are read here; their texts are never printed (ids are file names and conventions).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from correlator.explain import explain_text
from correlator.explain.hosts import host_in_line
from tests.correlator.corpus_open import KNOWN_TRAINING_MISSES, OPEN_ROUNDS
from tests.correlator.host_rename import CONVENTIONS, Renaming, rename, token
from tests.correlator.metamorphic_params import case_text, original_verdict, variant_params
from tests.correlator.test_explain_corpus import TRAINING

# Cases whose original verdict is wrong are not asserted on (a metamorphic test of a wrong
# answer would freeze the error).
NAMED = [
    c
    for c in TRAINING
    if c["node"] and c["file"] not in KNOWN_TRAINING_MISSES and c["file"] not in OPEN_ROUNDS
]
PAIRS = [(c, name) for c in NAMED for name in CONVENTIONS]

# (case file, convention) pairs that cannot be read without risking false hosts, with why.
SKIPPED: dict[tuple[str, str], str] = {}


def _renamed(case: dict[str, Any], convention: str) -> Renaming:
    return rename(case_text(case["file"]), case["file"], case["node"], CONVENTIONS[convention])


@pytest.mark.parametrize(
    ("case", "convention"),
    variant_params(PAIRS, SKIPPED),
)
def test_the_culprit_follows_the_renamed_host(case: dict[str, Any], convention: str) -> None:
    category, blame, node = original_verdict(case["file"])
    assert (node or "").lower() == case["node"].lower()  # right before the renaming
    renamed = _renamed(case, convention)
    got = explain_text(renamed.text)
    assert (got.category, got.blame, got.node) == (category, blame, renamed.of(node))


@pytest.mark.parametrize("case", NAMED, ids=[c["file"] for c in NAMED])
def test_the_renaming_renames_the_culprit(case: dict[str, Any]) -> None:
    # the truth's host is gone from the text under every convention, and its new name is there
    for name in CONVENTIONS:
        renamed = _renamed(case, name)
        new = renamed.of(original_verdict(case["file"])[2])
        # booleans only: a failing assert must not print the text
        there, left = (
            bool(new and new in renamed.text),
            re.search(token(case["node"]), renamed.text),
        )
        assert there, name
        assert left is None, name


def test_open_mpi_prefix_names_a_host_that_opens_with_a_digit() -> None:
    # Open MPI's "[%s:%05d] " (opal/util/stacktrace.c) with docker's default host name, the
    # container's id, and with a node named by its dashed address
    assert host_in_line("[036c56dce41b:391803] *** Process received signal ***") == "036c56dce41b"
    assert host_in_line("[10-12-3-162:07731] Signal: Aborted (6)") == "10-12-3-162"
    # never an address and port, a time of day, a date or a short number in brackets
    for line in (
        "[10.0.0.7:29500] connect failed",
        "[12:34] training resumed",
        "[2024-05-01:12345] started",
        "[0:12345] rank 0 failed",
        "[3f9e1c2ab7d0:123] a pid Open MPI pads to 5 digits",
    ):
        assert host_in_line(line) is None, line
