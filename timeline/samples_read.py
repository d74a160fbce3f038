"""Reads of the SQL sample store: raw rows for short ranges, rollups plus a raw tail for long.

A long range reads whole rollup buckets up to the rollup's watermark and raw samples for the
rest (the partial bucket at its start and everything after the watermark), then merges the two:
counts and sums add, extremes combine. Before the first rollup run everything is read raw.
Raw samples are read from each raw table (on SQLite `samples` and the stage,
timeline.samples_stage) in one statement, merged the same way: no sample is in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Integer,
    Table,
    and_,
    any_,
    bindparam,
    case,
    cast,
    false,
    func,
    or_,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from timeline import rollups
from timeline import tables as t
from timeline.samples import FieldStats, WindowStats
from timeline.samples_stage import raw_tables


@dataclass(frozen=True)
class Plan:
    """Which part of [since_ms, until_ms] comes from a rollup table, which from raw rows."""

    rolled: tuple[Table, int, int] | None  # table, [lo, hi) of bucket starts
    raw: list[tuple[int, int]]  # [lo, hi) ranges of ts_ms


def among(session: Session, column: Any, values: Iterable[Any]) -> ColumnElement[bool]:
    """`column IN values`; on PostgreSQL one array parameter, not thousands of placeholders."""
    vals = sorted(set(values))
    if session.get_bind().dialect.name == "postgresql":
        return column == any_(bindparam(None, vals, type_=ARRAY(column.type)))
    return column.in_(vals)


def plan(
    session: Session,
    *,
    since: float,
    until: float,
    after_s: float,
    hourly_after_s: float,
    inclusive: bool = True,
    bucket_s: int = 0,
) -> Plan:
    """How to read [since, until] (or [since, until)): raw when short or not rolled up, else
    rollups and raw. Answers in buckets of whole minutes (`bucket_s`) read the minute rollups
    at any span: their sums and counts add up exactly to such buckets."""
    lo, hi = round(since * 1000), round(until * 1000) + int(inclusive)
    span = until - since
    whole_minutes = bucket_s > 0 and bucket_s * 1000 % rollups.MINUTE_MS == 0
    level = (
        rollups.HOUR
        if span > hourly_after_s
        else rollups.MINUTE
        if span > after_s or whole_minutes
        else None
    )
    done = rollups.mark(session, level.name) if level is not None else None
    if level is None or done is None:
        return Plan(None, [(lo, hi)])
    w = level.bucket_ms
    first = -(-lo // w) * w  # the first whole bucket
    end = min(done, hi // w * w)
    if end <= first:
        return Plan(None, [(lo, hi)])
    table = t.samples_1h if level is rollups.HOUR else t.samples_1m
    return Plan((table, first, end), [(lo, first), (end, hi)])


def _one_statement(queries: Iterable[Any]) -> Any:
    """One query per raw table as one statement: a move of the stage commits between two
    statements, but never inside one, so no sample is read twice or missed."""
    qs = list(queries)
    return qs[0] if len(qs) == 1 else union_all(*qs)


# Each raw table's query binds every uuid, under SQLite's 32,766 parameters in one statement.
_SQLITE_UUIDS = 15_000


def _pieces(session: Session, uuids: Sequence[str]) -> list[Sequence[str]]:
    """`uuids` in pieces one statement can bind (SQLite's stage doubles the parameters);
    each GPU's rows are read by one statement still."""
    if len(raw_tables(session)) == 1 or len(uuids) <= _SQLITE_UUIDS:
        return [uuids]
    return [uuids[i : i + _SQLITE_UUIDS] for i in range(0, len(uuids), _SQLITE_UUIDS)]


def _picked(session: Session, uuids: Sequence[str] | None) -> Any:
    """The ids of these GPUs, as a subquery (None: every GPU)."""
    g = t.gpu_ids
    return None if uuids is None else select(g.c.id).where(among(session, g.c.uuid, uuids))


def _raw_where(p: Plan, s: Table) -> ColumnElement[bool]:
    ts = s.c.ts_ms
    ranges = [(a, b) for a, b in p.raw if b > a]
    if not ranges:
        return false()  # nothing raw to read (an empty OR would have read every row)
    # The OR of ranges inside one outer range: the outer bounds let the (gpu_id, ts_ms) index
    # seek to the window (an OR alone made SQLite read every row of the GPU, all history).
    outer = and_(ts >= min(a for a, _ in ranges), ts < max(b for _, b in ranges))
    return and_(outer, or_(*(and_(ts >= a, ts < b) for a, b in ranges)))


def _joined(table: Table) -> Any:
    return table.join(t.gpu_ids, t.gpu_ids.c.id == table.c.gpu_id)


def _per_gpu(session: Session, s: Table, uuids: Sequence[str], aggs: list[Any], *where: Any) -> Any:
    """(uuid, *aggs) per GPU of `uuids` over raw table `s`, rows filtered by `where`.

    `samples`: gpu_ids first, then each GPU's rows by the (gpu_id, ts_ms) index. The stage has
    no such index: its window is read once, grouped by GPU id, then joined (read per GPU, a
    node's 8 GPUs read 20,000 staged rows 8 times: 25 ms instead of 4, measured).
    """
    g = t.gpu_ids
    if s is not t.samples_staged:
        stmt = select(g.c.uuid, *aggs).select_from(_joined(s))
        return stmt.where(among(session, g.c.uuid, uuids), *where).group_by(g.c.uuid)
    ids = _picked(session, uuids)
    cols = [a.label(f"a{i}") for i, a in enumerate(aggs)]
    inner = select(s.c.gpu_id, *cols).where(s.c.gpu_id.in_(ids), *where).group_by(s.c.gpu_id)
    sub = inner.subquery()
    return select(g.c.uuid, *list(sub.c)[1:]).join_from(sub, g, g.c.id == sub.c.gpu_id)


def _ordered(col: Any) -> Any:
    """The column as min/max can take it: PostgreSQL has no min(boolean); 0/1 orders the same."""
    return cast(col, Integer) if isinstance(col.type, Boolean) else col


def window_stats(
    session: Session, p: Plan, uuids: Sequence[str], fields: Sequence[str]
) -> dict[str, WindowStats]:
    """Per GPU: times, count and per-field extremes and counts over the plan's ranges."""
    uuid = t.gpu_ids.c.uuid
    queries = [
        _one_statement(
            _per_gpu(session, s, piece, _raw_aggs(s, fields), _raw_where(p, s))
            for s in raw_tables(session)
        )
        for piece in _pieces(session, uuids)
    ]
    if p.rolled is not None:
        r, lo, hi = p.rolled
        aggs = [func.min(r.c.first_ts_ms), func.max(r.c.last_ts_ms), func.sum(r.c["count"])]
        for f in fields:
            n = r.c[f"{f}_n"]
            aggs += [func.min(r.c[f"{f}_min"]), func.max(r.c[f"{f}_max"]), func.sum(n)]
            aggs += [
                func.min(case((n > 0, r.c.first_ts_ms))),
                func.max(case((n > 0, r.c.last_ts_ms))),
            ]
        where = [among(session, uuid, uuids), r.c.bucket_ms >= lo, r.c.bucket_ms < hi]
        queries.append(select(uuid, *aggs).select_from(_joined(r)).where(*where).group_by(uuid))
    merged: dict[str, list[Any]] = {}
    for q in queries:
        for gpu, *vals in session.execute(q).all():
            merged[gpu] = _merge(merged[gpu], vals) if gpu in merged else list(vals)
    return {gpu: _stats(v, fields) for gpu, v in merged.items() if v[2]}


def _raw_aggs(s: Table, fields: Sequence[str]) -> list[Any]:
    """window_stats' aggregates over one raw table: times, count, then five per field."""
    aggs: list[Any] = [func.min(s.c.ts_ms), func.max(s.c.ts_ms), func.count()]
    for f in fields:
        with_f = case((s.c[f].is_not(None), s.c.ts_ms))
        col = _ordered(s.c[f])
        aggs += [func.min(col), func.max(col), func.count(s.c[f])]
        aggs += [func.min(with_f), func.max(with_f)]
    return aggs


_COMBINE = (min, max, None)  # first ts, last ts, count; then per field min, max, n, first, last


def _merge(a: list[Any], b: list[Any]) -> list[Any]:
    out = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        pos = i if i < 3 else (i - 3) % 5
        op = _COMBINE[pos] if i < 3 else (min, max, None, min, max)[pos]
        if x is None or y is None:
            out.append(y if x is None else x)
        else:
            out.append(x + y if op is None else op(x, y))
    return out


def _stats(v: list[Any], fields: Sequence[str]) -> WindowStats:
    per = {}
    for i, f in enumerate(fields):
        lo, hi, n, first, last = v[3 + 5 * i : 8 + 5 * i]
        per[f] = FieldStats(
            min=None if lo is None else float(lo),
            max=None if hi is None else float(hi),
            count=int(n or 0),
            first_ts=None if first is None else first / 1000.0,
            last_ts=None if last is None else last / 1000.0,
        )
    return WindowStats(v[0] / 1000.0, v[1] / 1000.0, int(v[2]), per)


def last_above(
    session: Session, p: Plan, uuids: Sequence[str], field: str, threshold: float, inclusive: bool
) -> dict[str, float]:
    """GPU uuid -> newest time its field was above (or at) threshold (rollups: the bucket's
    newest sample time)."""
    uuid = t.gpu_ids.c.uuid
    queries = [
        _one_statement(
            _per_gpu(
                session,
                s,
                piece,
                [func.max(s.c.ts_ms)],
                _raw_where(p, s),
                s.c[field] >= threshold if inclusive else s.c[field] > threshold,
            )
            for s in raw_tables(session)
        )
        for piece in _pieces(session, uuids)
    ]
    if p.rolled is not None:
        r, lo, hi = p.rolled
        peak = r.c[f"{field}_max"]
        r_above = peak >= threshold if inclusive else peak > threshold
        where = [among(session, uuid, uuids), r.c.bucket_ms >= lo, r.c.bucket_ms < hi, r_above]
        q = select(uuid, func.max(r.c.last_ts_ms)).select_from(_joined(r)).where(*where)
        queries.append(q.group_by(uuid))
    out: dict[str, float] = {}
    for q in queries:
        for gpu, ts in session.execute(q).all():
            out[gpu] = max(out.get(gpu, 0.0), ts / 1000.0)
    return out


def sums(
    session: Session,
    p: Plan,
    *,
    key: Any,
    uuids: Sequence[str] | None,
    bucket_s: int,
    fields: Sequence[str],
) -> dict[tuple[Any, int], list[float]]:
    """(key, bucket) -> [sum, count] per field, over raw rows and rollups of the plan.

    Raw rows are summed per GPU id first and joined to gpu_ids after: one join per GPU and
    bucket, not one per sample (the fleet heatmap reads every GPU). Rollup rows are one per GPU
    and minute already: joined directly. Groups are keyed bucket first: rows come in time order,
    and SQLite's grouping of the whole fleet's hour was ~3x quicker so (measured).
    """
    g, width = t.gpu_ids, bucket_s * 1000
    picked = _picked(session, uuids)
    parts = [
        _one_statement(
            _raw_sums(s, p, key, _picked(session, piece), width, fields)
            for s in raw_tables(session)
        )
        for piece in ([None] if uuids is None else _pieces(session, uuids))
    ]
    if p.rolled is not None:
        r, lo, hi = p.rolled
        cols: list[Any] = []
        for f in fields:
            n = r.c[f"{f}_n"]
            cols += [func.sum(r.c[f"{f}_mean"] * n), func.sum(n)]
        rb = (r.c.bucket_ms // width).label("b")
        q = select(key, rb, *cols).join_from(r, g, g.c.id == r.c.gpu_id)
        q = q.where(r.c.bucket_ms >= lo, r.c.bucket_ms < hi)
        if picked is not None:
            q = q.where(r.c.gpu_id.in_(picked))
        parts.append(q.group_by(rb, key))
    out: dict[tuple[Any, int], list[float]] = {}
    for part in parts:
        for k, bucket, *vals in session.execute(part).all():
            acc = out.setdefault((k, int(bucket)), [0.0] * len(vals))
            for i, v in enumerate(vals):
                acc[i] += float(v or 0.0)
    return out


def _raw_sums(s: Table, p: Plan, key: Any, picked: Any, width: int, fields: Sequence[str]) -> Any:
    """sums' query over one raw table: per GPU and bucket first, then joined to gpu_ids."""
    g = t.gpu_ids
    cols: list[Any] = []
    for f in fields:
        cols += [func.sum(s.c[f]), func.count(s.c[f])]
    b = (s.c.ts_ms // width).label("b")
    inner = select(s.c.gpu_id, b, *cols).where(_raw_where(p, s))
    if picked is not None:
        inner = inner.where(s.c.gpu_id.in_(picked))
    sub = inner.group_by(b, s.c.gpu_id).subquery()
    values = [func.sum(c) for c in list(sub.c)[2:]]
    raw = select(key, sub.c.b, *values).join_from(sub, g, g.c.id == sub.c.gpu_id)
    return raw.group_by(sub.c.b, key)


def mean(acc: list[float], i: int) -> float | None:
    """The mean of field `i` from a sums() accumulator; None where no sample carried it."""
    total, n = acc[2 * i], acc[2 * i + 1]
    return total / n if n else None
