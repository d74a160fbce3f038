"""Samples checked in one tight loop, without a pydantic model per sample.

The Sample model (timeline.bounds types) stays the contract; this is a fast path that accepts
only a strict subset of what the model accepts: JSON numbers of the field's own type (an int
where a float is due is widened, as the model does), booleans as booleans, clean strings, no
field the model does not know. Anything else (a string holding a number, a float for an
integer, an out-of-range or non-finite value, an unknown field) makes it give up on the whole
list, and the caller validates that list with the model, item by item, so rejections and their
messages stay the model's own. The bounds are read off the model's fields at import.
"""

from __future__ import annotations

import functools
import operator
import types
from typing import Annotated, Any, Union, get_args, get_origin

from annotated_types import Ge, Le
from pydantic.fields import FieldInfo

from timeline import bounds as b
from timeline.models import Sample, SampleRow

# column kinds of the fast path
_FLOAT, _INT, _BOOL = 0, 1, 2
_FIELDS = SampleRow._fields
_UUID_MAX, _KEY_MAX = 96, 64  # lengths of b.Id96 and b.ExtraKey, checked below
_EXTRA_LO, _EXTRA_HI = -1e15, 1e15  # b.ExtraValue, checked below


def _bounds(meta: list[Any]) -> tuple[Any, Any]:
    lo = next(m.ge for m in meta if isinstance(m, Ge))
    hi = next(m.le for m in meta if isinstance(m, Le))
    return lo, hi


def _value_spec(name: str) -> tuple[int, int, Any, Any]:
    """(position, kind, lo, hi) of an optional value field, from the model's annotation."""
    ann = Sample.model_fields[name].annotation
    if get_origin(ann) not in (Union, types.UnionType) or type(None) not in get_args(ann):
        raise TypeError(f"Sample.{name}: the fast check knows only optional value fields")
    (inner,) = (a for a in get_args(ann) if a is not type(None))
    at = _FIELDS.index(name)
    if inner is bool:
        return at, _BOOL, None, None
    if get_origin(inner) is not Annotated:
        raise TypeError(f"Sample.{name}: expected a bounded float or int")
    base, *meta = get_args(inner)
    infos = [m for info in meta if isinstance(info, FieldInfo) for m in info.metadata]
    kinds = {float: _FLOAT, int: _INT}
    if base not in kinds:
        raise TypeError(f"Sample.{name}: expected a bounded float or int")
    return (at, kinds[base], *_bounds(infos))


_SPECS = {f: _value_spec(f) for f in _FIELDS if f not in ("ts", "gpu_uuid", "extra")}


def _check_fixed_bounds() -> None:
    """The constants used for ts, gpu_uuid and extra must be the model's (fails at import)."""
    fields = Sample.model_fields
    ts_lo, ts_hi = _bounds(fields["ts"].metadata)
    uuid = next(m for m in fields["gpu_uuid"].metadata if hasattr(m, "max_length"))
    key_t, value_t = get_args(get_args(fields["extra"].annotation)[0])
    key = get_args(key_t)[1]
    value_lo, value_hi = _bounds(get_args(value_t)[1].metadata)
    got = (ts_lo, ts_hi, uuid.min_length, uuid.max_length, uuid.pattern, key.max_length)
    want = (b.TS_MIN, b.TS_MAX, 1, _UUID_MAX, b.NAME_PATTERN, _KEY_MAX)
    extra_max = next(m.max_length for m in fields["extra"].metadata if hasattr(m, "max_length"))
    if got != want or (value_lo, value_hi) != (_EXTRA_LO, _EXTRA_HI) or extra_max != 64:
        raise TypeError("Sample's ts, gpu_uuid or extra bounds changed: update sample_check")
    if key.min_length != 1 or key.pattern != b.NAME_PATTERN or b.EXTRA_MAX_KEYS != 64:
        raise TypeError("Sample.extra's key bounds changed: update sample_check")


_check_fixed_bounds()
# SampleRow._make without its Python frame per row (5% of the ingest's time, profiled)
_new_row = functools.partial(tuple.__new__, SampleRow)
_NAME_BAD = b._NAME_BAD  # the compiled form of b.NAME_PATTERN's forbidden characters


def _clean_name(value: Any, max_length: int) -> bool:
    return type(value) is str and 0 < len(value) <= max_length and _NAME_BAD.search(value) is None


def _extra(value: Any) -> dict[str, float] | None:
    """A valid `extra` mapping (ints widened to float), or None when the model must judge it."""
    if type(value) is not dict or len(value) > 64:
        return None
    out = {}
    for key, v in value.items():
        if not _clean_name(key, _KEY_MAX):
            return None
        if (type(v) is float or type(v) is int) and _EXTRA_LO <= v <= _EXTRA_HI:
            out[key] = float(v)
        else:
            return None
    return out


def _row(item: Any, lo_ts: float, hi_ts: float) -> SampleRow | None:
    """One item as a row, or None when it is not in the fast path's subset."""
    if type(item) is not dict:
        return None
    ts, uuid = item.get("ts"), item.get("gpu_uuid")
    if not (type(ts) is float or type(ts) is int) or not lo_ts <= ts <= hi_ts:
        return None
    if not _clean_name(uuid, _UUID_MAX):
        return None
    values: list[Any] = [float(ts), uuid, *(None,) * (len(_FIELDS) - 2)]
    for key, v in item.items():
        spec = _SPECS.get(key)
        if spec is None:
            if key == "extra":
                if v is not None and (v := _extra(v)) is None:
                    return None
                values[-1] = v
            elif key not in ("ts", "gpu_uuid"):
                return None  # a field the model forbids
            continue
        at, kind, lo, hi = spec
        if v is None:
            continue
        tv = type(v)
        if kind == _FLOAT and (tv is float or tv is int) and lo <= v <= hi:
            values[at] = float(v)
        elif (kind == _INT and tv is int and lo <= v <= hi) or (kind == _BOOL and tv is bool):
            values[at] = v
        else:
            return None
    return SampleRow._make(values)


def fast_rows(items: list[Any], window: b.TimeWindow | None) -> list[SampleRow] | None:
    """Every item as a SampleRow when all are in the fast subset, else None (use the model)."""
    lo_ts, hi_ts = b.TS_MIN, b.TS_MAX
    if window is not None:
        lo_ts = max(lo_ts, window.now - window.max_age_s)
        hi_ts = min(hi_ts, window.now + window.max_ahead_s)
    values = _uniform(items)
    if values is not None:
        return _by_column(len(items), *values, lo_ts, hi_ts)
    rows = []
    for item in items:
        row = _row(item, lo_ts, hi_ts)
        if row is None:
            return None
        rows.append(row)
    return rows


def _uniform(items: list[Any]) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """(keys, columns) when every item is a dict with the first one's keys, else None.

    In C loops (map, itemgetter, zip): a Python loop over the items cost more than the checks.
    """
    if not items or type(items[0]) is not dict or len(items[0]) < 2:
        return None
    keys = list(items[0])
    if set(map(type, items)) != {dict} or set(map(len, items)) != {len(keys)}:
        return None
    try:  # as many keys as the first item, all of its keys present: the same key set
        per_item = list(map(operator.itemgetter(*keys), items))
    except KeyError:
        return None
    return keys, list(zip(*per_item, strict=True))


def _numbers(col: list[Any], kind: int, lo: Any, hi: Any) -> list[Any] | None:
    """A column of numbers checked at C speed (min, max, a sum that NaN would poison)."""
    kinds = set(map(type, col))
    present = col
    if type(None) in kinds:
        kinds.discard(type(None))
        present = [v for v in col if v is not None]
    if not present:
        return col
    allowed = {float, int} if kind == _FLOAT else {int}
    if not kinds <= allowed or not (lo <= min(present) and max(present) <= hi):
        return None
    if kind == _FLOAT:
        if sum(present) != sum(present):  # a NaN slips past min and max
            return None
        if int in kinds:
            return [v if v is None else float(v) for v in col]
    return col


def _by_column(
    n: int, keys: list[str], cols: list[tuple[Any, ...]], lo_ts: float, hi_ts: float
) -> Any:
    """Items with one key set (an agent's usual batch), checked a column at a time."""
    if "ts" not in keys or "gpu_uuid" not in keys:
        return None
    columns: list[Any] = [None] * len(_FIELDS)
    for key, col in zip(keys, cols, strict=True):
        checked = _column(key, col, lo_ts, hi_ts)
        if checked is None:
            return None
        columns[_FIELDS.index(key)] = checked
    full = [[None] * n if c is None else c for c in columns]
    return list(map(_new_row, zip(*full, strict=True)))


def _column(key: str, col: Any, lo_ts: float, hi_ts: float) -> Any:
    """The column of `key` checked (ints widened where a float is due), or None."""
    if key == "ts":
        col = _numbers(col, _FLOAT, lo_ts, hi_ts)
        return None if col is None or None in col else col
    if key == "gpu_uuid":
        if set(map(type, col)) != {str} or min(map(len, col)) < 1:
            return None
        if max(map(len, col)) > _UUID_MAX or _NAME_BAD.search("".join(col)):
            return None
        return col
    if key == "extra":
        checked = [None if e is None else _extra(e) for e in col]
        if any(c is None and e is not None for c, e in zip(checked, col, strict=True)):
            return None
        return checked
    spec = _SPECS.get(key)
    if spec is None:
        return None  # a field the model forbids
    if spec[1] == _BOOL:
        return col if set(map(type, col)) <= {bool, type(None)} else None
    return _numbers(col, *spec[1:])
