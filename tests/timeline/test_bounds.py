"""The boundary contract (timeline.bounds): every model field fits its column, and Hypothesis
properties: whatever a client sends, an item is refused, or the database takes it on both
backends; strings, JSON and log text keep their caps."""

from __future__ import annotations

import enum
import json
import math
import re
import time
from typing import Annotated, Any, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from sqlalchemy import REAL, BigInteger, Boolean, Float, Integer, String, Table, Text
from sqlalchemy.orm import Session

from timeline import bounds, service
from timeline import tables as t
from timeline.bounds import WINDOW_CONTEXT, TimeWindow, check_json, clean_text
from timeline.intake import ITEM_MODELS
from timeline.models import Allocation, Batch, Event, GpuInfo, Job, Node, Sample

# Which table stores each model, and fields that are not a column of the same name.
STORED: dict[type[BaseModel], tuple[Table, dict[str, str | None]]] = {
    GpuInfo: (t.gpus, {}),
    Sample: (t.samples, {"ts": None, "gpu_uuid": None}),  # gpu_ids and ts_ms below
    Event: (t.events, {}),
    Job: (t.jobs, {}),
    Allocation: (t.allocations, {}),
    Node: (t.nodes, {}),
}
FLOAT32_MAX = 3.4028234663852886e38
RANGES = {
    Integer: (bounds.INT32_MIN, bounds.INT32_MAX),
    BigInteger: (bounds.INT64_MIN, bounds.INT64_MAX),
    Float: (-bounds.FLOAT64_MAX, bounds.FLOAT64_MAX),
    REAL: (-FLOAT32_MAX, FLOAT32_MAX),  # 4-byte gauges of compact samples (revision 0009)
}


def _metadata(annotation: Any) -> list[Any]:
    """Constraint objects anywhere in a field's type (also inside `X | None`)."""
    found: list[Any] = []
    if get_origin(annotation) is Annotated:
        for item in annotation.__metadata__:
            found += item.metadata if isinstance(item, FieldInfo) else [item]
    for arg in get_args(annotation):
        found += _metadata(arg)
    return found


def _is_enum(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def _constraint(info: FieldInfo, name: str) -> Any:
    items = [*info.metadata, *_metadata(info.annotation)]
    values = [getattr(m, name) for m in items if getattr(m, name, None) is not None]
    if not values:
        return None
    return min(values) if name in ("le", "max_length") else max(values)


@pytest.mark.parametrize("model", list(STORED), ids=lambda m: m.__name__)
def test_every_model_field_fits_the_range_of_its_column(model: type[BaseModel]) -> None:
    table, renamed = STORED[model]
    for name, info in model.model_fields.items():
        column = table.c.get(renamed.get(name, name) or "")
        if column is None or isinstance(column.type, Boolean):
            continue
        if isinstance(column.type, Integer | BigInteger | Float):
            lo, hi = RANGES[type(column.type)]
            ge, le = _constraint(info, "ge"), _constraint(info, "le")
            assert ge is not None and le is not None, f"{model.__name__}.{name}: unbounded"
            assert lo <= ge and le <= hi, f"{model.__name__}.{name}: [{ge}, {le}] vs {column.type}"
        elif isinstance(column.type, String) and not isinstance(column.type, Text):
            enums = [a for a in (info.annotation, *get_args(info.annotation)) if _is_enum(a)]
            cap = max(len(v.value) for v in enums[0]) if enums else _constraint(info, "max_length")
            assert cap is not None and cap <= column.type.length, f"{model.__name__}.{name}"


def test_sample_times_fit_integer_milliseconds_and_uuids_fit_the_gpu_id_table() -> None:
    assert bounds.INT64_MIN <= bounds.TS_MIN * 1000 and bounds.TS_MAX * 1000 <= bounds.INT64_MAX
    cap = _constraint(Sample.model_fields["gpu_uuid"], "max_length")
    assert cap is not None and cap <= t.gpu_ids.c.uuid.type.length  # type: ignore[attr-defined]


# --- properties: whatever arrives is refused or stored --------------------------------------
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
NOW = time.time()
BASE: dict[str, dict[str, Any]] = {
    "gpus": {"uuid": "GPU-1", "node": "n1"},
    "samples": {"ts": NOW, "gpu_uuid": "GPU-1"},
    "events": {"ts": NOW, "source": "kmsg", "kind": "xid"},
    "jobs": {"scheduler": "slurm", "job_id": "1"},
    "allocations": {"scheduler": "slurm", "job_id": "1", "node": "n1", "start_ts": NOW - 5},
    "nodes": {"name": "n1"},
    "job_patches": {"job_id": "1"},
}


@st.composite
def hostile_items(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A valid item of some kind with one to three fields replaced by anything JSON holds."""
    kind = draw(st.sampled_from(sorted(BASE)))
    item = dict(BASE[kind])
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(ITEM_MODELS[kind].model_fields)))
        item[name] = draw(JSON_VALUES)
    return kind, item


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drawn=hostile_items())
def test_an_item_is_refused_or_the_database_takes_it(
    session: Session, drawn: tuple[str, dict[str, Any]]
) -> None:
    kind, item = drawn
    window = {WINDOW_CONTEXT: TimeWindow.around_now(max_age_s=86400.0, max_ahead_s=3600.0)}
    try:
        valid = ITEM_MODELS[kind].model_validate(item, context=window)
    except ValidationError:
        return  # refused, with the field named: nothing reached the database
    batch = Batch(agent="prop", node="n1", batch_id="property-batch", **{kind: [valid]})
    try:
        service.append_batch(session, batch=batch, received_ts=NOW)
        session.flush()
    finally:
        session.rollback()  # every example starts from an empty store


@given(value=JSON_VALUES, cap=st.integers(16, 400))
def test_accepted_json_fits_its_byte_cap_and_holds_only_finite_64_bit_numbers(
    value: Any, cap: int
) -> None:
    try:
        check_json(value, max_bytes=cap, max_depth=4)
    except ValueError:
        return
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert len(text.encode()) <= cap
    numbers = re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)
    assert all(math.isfinite(float(n)) for n in numbers)


CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@given(text=st.text(max_size=300))
def test_clean_text_leaves_no_control_character_and_is_accepted_as_log_text(text: str) -> None:
    cleaned = clean_text(text, 200)
    assert not CONTROL.search(cleaned) and len(cleaned) <= 200
    assert clean_text(cleaned, 200) == cleaned
    ev = Event(ts=NOW, source="joblog", kind="other", message=cleaned, raw=cleaned)
    assert ev.message == cleaned


@given(text=st.text(max_size=300))
def test_names_refuse_any_control_character_and_text_allows_only_tab_newline_cr(
    text: str,
) -> None:
    def accepted(**fields: Any) -> bool:
        try:
            Job(scheduler="slurm", job_id="1", **fields)
            return True
        except ValidationError:
            return False

    has_control = re.search(r"[\x00-\x1f\x7f]", text) is not None
    assert accepted(user=text) == (not has_control and len(text) <= 128)
    assert accepted(name=text) == (not CONTROL.search(text) and len(text) <= 255)


@given(size=st.integers(0, 40_000))
def test_log_text_over_its_cap_is_cut_with_a_marker_never_refused(size: int) -> None:
    ev = Event(ts=NOW, source="joblog", kind="other", message="m" * size, raw="r" * size)
    assert len(ev.message) == min(size, bounds.MESSAGE_MAX)
    assert ev.raw is not None and len(ev.raw) == min(size, bounds.RAW_MAX)
    assert ev.message.endswith(bounds.TRUNCATED) == (size > bounds.MESSAGE_MAX)
