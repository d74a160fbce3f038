"""The parameters of the metamorphic tests: one per training case and variant of it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest


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
