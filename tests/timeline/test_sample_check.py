"""The fast sample check accepts only what the Sample model accepts, with equal values."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from timeline.bounds import WINDOW_CONTEXT, TimeWindow
from timeline.intake import take_in
from timeline.models import Sample, SampleRow
from timeline.sample_check import fast_rows

NOW = 1_750_000_000.0
WINDOW = TimeWindow(NOW, max_age_s=3600.0, max_ahead_s=60.0)
FLOATS = ("util_gpu", "util_mem", "mem_used_mb", "mem_total_mb", "power_w", "temp_gpu")
FLOATS += ("temp_mem", "sm_clock_mhz", "energy_mj")
INTS = ("clock_event_reasons", "ecc_sbe_volatile", "remapped_correctable", "pcie_replay")
INTS += ("ecc_dbe_volatile", "ecc_sbe_aggregate", "ecc_dbe_aggregate", "remapped_uncorrectable")
INTS += ("retired_pages_sbe", "retired_pages_dbe", "nvlink_crc_errors", "nvlink_replay_errors")
INTS += ("nvlink_recovery_errors",)
BOOLS = ("remap_pending", "remap_failure")

# Edges of every bound, and values of the wrong type, mixed with ordinary ones.
_EDGES = [0, -1, 100, 101, 1e9, 1e9 + 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 1e18, 2**53 + 1]
_EDGES += [-273.15, -273.16, 1000.0, 1e6, 1e15, -1e15, 1e16, 0.5, -0.0]
anything = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(_EDGES),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-300, max_value=1100),
    st.sampled_from(["1", "x", "", "NaN", "55.5", "true"]),
    st.lists(st.integers(), max_size=2),
)
times = st.one_of(
    st.floats(min_value=NOW - 3600, max_value=NOW + 60),
    st.floats(min_value=NOW - 4000, max_value=NOW + 100),
    st.integers(min_value=int(NOW) - 4000, max_value=int(NOW) + 100),
    st.sampled_from([NOW - 3600, NOW + 60, NOW - 3600.001, NOW + 60.001, "1750000000", None]),
)
clean = st.text(st.characters(codec="utf-8", exclude_categories=["Cc"]), min_size=1, max_size=96)
names = st.one_of(
    clean,
    clean,
    st.text(min_size=0, max_size=100),
    st.sampled_from(["GPU-1", "GPU-\x00", "GPU\n", "G\x7f", "x" * 96, "x" * 97, 7]),
)
extras = st.one_of(
    st.none(),
    st.dictionaries(names, anything, max_size=4),
    st.dictionaries(st.sampled_from(["sm_active", "k"]), st.floats(-2e15, 2e15), max_size=3),
    st.dictionaries(names, st.integers(-(10**16), 10**16) | st.floats(-1e3, 1e3), max_size=3),
    st.sampled_from([{f"k{i}": 1.0 for i in range(65)}, [], "x"]),
)


@st.composite
def sample_items(draw: st.DrawFn) -> Any:
    """A sample item as a JSON object: mostly well-formed, often with one bad part."""
    item: dict[str, Any] = {"ts": draw(times), "gpu_uuid": draw(names)}
    if draw(st.integers(0, 2)) == 0:
        for field in draw(st.lists(st.sampled_from(FLOATS + INTS + BOOLS), max_size=2)):
            item[field] = draw(anything)  # often out of the contract
    for field in draw(st.lists(st.sampled_from(FLOATS), max_size=4)):
        item[field] = draw(st.floats(min_value=0, max_value=100) | st.integers(0, 100))
    for field in draw(st.lists(st.sampled_from(INTS), max_size=3)):
        item[field] = draw(st.integers(0, 2**31 - 1))
    for field in draw(st.lists(st.sampled_from(BOOLS), max_size=2)):
        item[field] = draw(st.booleans() | st.none())
    if draw(st.integers(0, 3)) == 0:
        item["extra"] = draw(extras)
    if draw(st.integers(0, 9)) == 0:
        item[draw(st.sampled_from(["bogus", "node", "gpu"]))] = 1
    if draw(st.integers(0, 19)) == 0:
        for key in draw(st.lists(st.sampled_from(["ts", "gpu_uuid"]), max_size=2)):
            item.pop(key, None)
    # Through JSON, as the ingest gets it (no tuples, no lone surrogates).
    try:
        return orjson.loads(orjson.dumps(item))
    except orjson.JSONEncodeError:
        return {"ts": NOW, "gpu_uuid": "GPU-1"}


def _model(item: Any) -> Sample | None:
    try:
        return Sample.model_validate(item, context={WINDOW_CONTEXT: WINDOW})
    except ValidationError:
        return None


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (0 == 0.0 == False would hide a lost conversion)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(item=sample_items())
def test_fast_check_accepts_only_what_the_model_accepts_with_equal_values(item: Any) -> None:
    rows = fast_rows([item], WINDOW)
    model = _model(item)
    if rows is None:
        return  # the caller asks the model: whatever it says is the answer
    assert model is not None, f"fast path accepted what the model refuses: {item!r}"
    (row,) = rows
    expected = SampleRow.of(model)
    for name, got, want in zip(SampleRow._fields, row, expected, strict=True):
        assert _same(got, want), f"{name}: fast {got!r} != model {want!r} for {item!r}"


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(items=st.lists(sample_items(), min_size=1, max_size=6), same_keys=st.booleans())
def test_intake_of_samples_equals_the_model_path_item_by_item(
    items: list[Any], same_keys: bool
) -> None:
    if same_keys and isinstance(items[0], dict):  # an agent's usual batch: checked by column
        keys = list(items[0])
        items = [
            {k: (item.get(k, items[0][k]) if isinstance(item, dict) else items[0][k]) for k in keys}
            for item in items
        ]
    body = orjson.dumps({"agent": "a", "node": "n", "batch_id": "batch-0001", "samples": items})
    intake = take_in(body, max_items=100, window=WINDOW)
    models = [(i, _model(item)) for i, item in enumerate(items)]
    kept = [(i, m) for i, m in models if m is not None]
    assert intake.positions["samples"] == [i for i, _ in kept]
    assert [r.index for r in intake.rejected] == [i for i, m in models if m is None]
    assert all(r.kind == "samples" and r.status == 422 for r in intake.rejected)
    assert len(intake.samples) == len(kept)
    for row, (_, m) in zip(intake.samples, kept, strict=True):
        assert all(_same(a, b) for a, b in zip(row, SampleRow.of(m), strict=True))


def test_fast_check_gives_up_on_a_whole_list_for_one_bad_item() -> None:
    good = {"ts": NOW, "gpu_uuid": "GPU-1", "util_gpu": 50}
    assert fast_rows([good, good], WINDOW) == [SampleRow(NOW, "GPU-1", util_gpu=50.0)] * 2
    assert fast_rows([good, {**good, "util_gpu": 100.5}], WINDOW) is None


@pytest.mark.parametrize(
    "change",
    [
        {"util_gpu": "50"},  # the model would coerce a numeric string; the fast path defers
        {"clock_event_reasons": 1.0},
        {"remap_pending": 1},
        {"unknown": 1},
        {"ts": NOW - 3601},
        {"gpu_uuid": "GPU\x00"},
    ],
)
def test_fast_check_defers_to_the_model_outside_its_subset(change: dict[str, Any]) -> None:
    assert fast_rows([{"ts": NOW, "gpu_uuid": "GPU-1", **change}], WINDOW) is None


def test_rejected_sample_keeps_the_models_words() -> None:
    items = [{"ts": NOW, "gpu_uuid": "GPU-1"}, {"ts": NOW, "gpu_uuid": "GPU-2", "power_w": -1}]
    body = orjson.dumps({"agent": "a", "node": "n", "batch_id": "batch-0001", "samples": items})
    intake = take_in(body, max_items=100, window=WINDOW)
    assert [r.index for r in intake.rejected] == [1]
    (error,) = intake.rejected[0].errors
    assert error.field == "samples.1.power_w"
    assert "greater than or equal to 0" in error.error
    assert intake.samples == [SampleRow(NOW, "GPU-1")]
