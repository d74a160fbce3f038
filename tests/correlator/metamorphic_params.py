"""The parameters of the metamorphic tests (one per training case and variant of it), and the
case text and original verdict they share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import pytest

from correlator.explain import explain_text
from tests.correlator.test_explain_corpus import CORPUS


@cache
def case_text(file: str) -> str:
    """A (training) case's text, read once per session."""
    return (CORPUS / file).read_text("utf-8")


@cache
def original_verdict(file: str) -> tuple[Any, Any, Any]:
    """Explain's category, blame and node of a case's unchanged text, computed once."""
    got = explain_text(case_text(file))
    return got.category, got.blame, got.node


def variant_params(
    pairs: Iterable[tuple[dict[str, Any], Any]], skipped: Mapping[tuple[str, Any], str]
) -> list[Any]:
    """One pytest param per (case, variant), its id "FILE-VARIANT", skipped with its reason
    where `skipped` lists the pair (ids are file names: a case's text is never printed)."""
    params = []
    for case, variant in pairs:
        key = (case["file"], variant)
        marks = [pytest.mark.skip(reason=skipped[key])] if key in skipped else []
        params.append(pytest.param(case, variant, id=f"{case['file']}-{variant}", marks=marks))
    return params
