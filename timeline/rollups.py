"""Sample rollups and retention: the scheduled jobs that keep the SQL store bounded.

Raw samples roll up into 1-minute buckets, those into 1-hour buckets (min, max, mean, last
and count per gauge). A run recomputes whole buckets from a watermark, so running a window
again replaces its rows (idempotent), and it redoes a short overlap to take in late samples.
Retention deletes raw rows, then minute and hour rollups, past their ages; never data that is
not rolled up yet. On PostgreSQL raw rows go by dropping whole day partitions. On SQLite both
jobs first move staged samples into `samples` (timeline.samples_stage).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from timeline import partitions, samples_stage
from timeline import tables as t
from timeline.db import unit_of_work, upsert_insert
from timeline.settings import Settings

MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
LAG_MS = 60_000  # a minute is rolled up once it ended this long ago (agents deliver late)
OVERLAP_MS = 5 * MINUTE_MS  # each run redoes this much before its watermark: late samples
MAX_SPAN_MS = 6 * HOUR_MS  # work per run is bounded; a backlog is caught up over runs


@dataclass(frozen=True)
class Level:
    """One rollup: its table, bucket width, and the table it is computed from."""

    name: str
    table: str
    bucket_ms: int
    source: str


MINUTE = Level("1m", "samples_1m", MINUTE_MS, "samples")
HOUR = Level("1h", "samples_1h", HOUR_MS, "samples_1m")


def _from_raw(bucket: int) -> tuple[str, str]:
    """(aggregate select list, newest-value select list) over raw samples."""
    aggs = [f"MIN({f}) AS {f}_min, MAX({f}) AS {f}_max, AVG({f}) AS {f}_mean, COUNT({f}) AS {f}_n"
            for f in t.GAUGE_FIELDS]  # fmt: skip
    head = f"ts_ms / {bucket} * {bucket} AS b, gpu_id, COUNT(*) AS cnt, MIN(ts_ms) AS first_ts, "
    return head + "MAX(ts_ms) AS last_ts, " + ", ".join(aggs), "ts_ms = a.last_ts"


def _from_minutes(bucket: int) -> tuple[str, str]:
    """(aggregate select list, newest-value select list) over minute rollups."""
    aggs = [
        f"MIN({f}_min) AS {f}_min, MAX({f}_max) AS {f}_max, "
        f"SUM(CAST({f}_mean AS DOUBLE PRECISION) * {f}_n) / NULLIF(SUM({f}_n), 0) AS {f}_mean, "
        f"SUM({f}_n) AS {f}_n"
        for f in t.GAUGE_FIELDS
    ]
    head = f"bucket_ms / {bucket} * {bucket} AS b, gpu_id, SUM(count) AS cnt, "
    head += "MIN(first_ts_ms) AS first_ts, MAX(last_ts_ms) AS last_ts, "
    return head + ", ".join(aggs), f"bucket_ms = a.last_ts / {MINUTE_MS} * {MINUTE_MS}"


def _recompute(session: Session, level: Level, lo: int, hi: int) -> int:
    """Replace the level's buckets in [lo, hi) with ones computed from its source."""
    raw = level.source == "samples"
    aggs, newest = (_from_raw if raw else _from_minutes)(level.bucket_ms)
    where = "ts_ms >= :lo AND ts_ms < :hi" if raw else "bucket_ms >= :lo AND bucket_ms < :hi"
    last = ", ".join(f"l.{f}" if raw else f"l.{f}_last" for f in t.GAUGE_FIELDS)
    cols = ["bucket_ms", "gpu_id", "count", "first_ts_ms", "last_ts_ms"]
    picks = ["a.b", "a.gpu_id", "a.cnt", "a.first_ts", "a.last_ts"]
    for f in t.GAUGE_FIELDS:
        cols += [f"{f}_min", f"{f}_max", f"{f}_mean", f"{f}_n"]
        picks += [f"a.{f}_min", f"a.{f}_max", f"a.{f}_mean", f"a.{f}_n"]
    cols += [f"{f}_last" for f in t.GAUGE_FIELDS]
    bounds = {"lo": lo, "hi": hi}
    session.execute(text(f"DELETE FROM {level.table} WHERE bucket_ms >= :lo AND bucket_ms < :hi"),
                    bounds)  # fmt: skip
    stmt = (
        f"INSERT INTO {level.table} ({', '.join(cols)}) SELECT {', '.join(picks)}, {last} "
        f"FROM (SELECT {aggs} FROM {level.source} WHERE {where} GROUP BY 1, 2) a "
        f"JOIN {level.source} l ON l.gpu_id = a.gpu_id AND l.{newest}"
    )
    result = session.execute(text(stmt), bounds)
    return int(getattr(result, "rowcount", 0) or 0)


def mark(session: Session, level: str) -> int | None:
    """How far (ms, exclusive) the level is rolled up; None before its first run."""
    stmt = select(t.rollup_marks.c.done_until_ms).where(t.rollup_marks.c.level == level)
    return session.execute(stmt).scalar()


def _set_mark(session: Session, level: str, until_ms: int) -> None:
    stmt = upsert_insert(session, t.rollup_marks).values(level=level, done_until_ms=until_ms)
    session.execute(
        stmt.on_conflict_do_update(index_elements=["level"], set_={"done_until_ms": until_ms})
    )


def _oldest(session: Session, table: str, column: str) -> int | None:
    value = session.execute(text(f"SELECT MIN({column}) FROM {table}")).scalar()
    return None if value is None else int(value)


def roll_up(session: Session, *, level: Level, now: float) -> int:
    """Roll up the next closed stretch of the level (bounded); returns buckets written."""
    w = level.bucket_ms
    if level is MINUTE:  # staged samples (SQLite) are rolled up like the rest: filed first
        samples_stage.move(session)
        ready = (int(now * 1000) - LAG_MS) // w * w
    else:  # whole hours the minute rollup has finished
        ready = (mark(session, MINUTE.name) or 0) // w * w
    done = mark(session, level.name)
    lo = 0 if done is None else max(done - max(OVERLAP_MS, w), 0)  # redo the overlap
    column = "ts_ms" if level.source == "samples" else "bucket_ms"
    found = session.execute(
        text(f"SELECT MIN({column}) FROM {level.source} WHERE {column} >= :lo"), {"lo": lo}
    ).scalar()
    if found is None or int(found) >= ready:  # nothing to roll up before `ready`: skip the gap
        if ready > (done or 0):
            _set_mark(session, level.name, ready)
        return 0
    lo = max(lo, int(found) // w * w)
    hi = min(ready, lo + max(MAX_SPAN_MS, w))
    if hi <= lo:
        return 0
    written = _recompute(session, level, lo, hi)
    _set_mark(session, level.name, max(hi, done or 0))
    return written


@dataclass(frozen=True)
class Retention:
    """How long each kind of telemetry is kept, in days."""

    raw_days: float = 7.0
    minute_days: float = 90.0
    hour_days: float = 365.0
    partitions_ahead_days: int = 3


def expire(session: Session, *, now: float, keep: Retention) -> dict[str, int]:
    """Delete telemetry past its age (never rows not yet rolled up); returns what went."""
    now_ms = int(now * 1000)
    out: dict[str, int] = {}
    raw_cut = min(now_ms - int(keep.raw_days * DAY_MS), mark(session, MINUTE.name) or 0)
    if session.get_bind().dialect.name == "postgresql":
        partitions.ensure_partitions(session, now=now, ahead_days=keep.partitions_ahead_days)
        out["raw_partitions"] = len(
            partitions.drop_expired(session, before_ms=raw_cut // DAY_MS * DAY_MS)
        )
    else:
        samples_stage.move(session)  # a late sample still staged expires like one filed
        out["raw"] = _delete_before(session, "samples", "ts_ms", raw_cut, HOUR_MS)
    minute_cut = min(now_ms - int(keep.minute_days * DAY_MS), mark(session, HOUR.name) or 0)
    out["1m"] = _delete_before(session, "samples_1m", "bucket_ms", minute_cut, DAY_MS)
    hour_cut = now_ms - int(keep.hour_days * DAY_MS)
    out["1h"] = _delete_before(session, "samples_1h", "bucket_ms", hour_cut, 7 * DAY_MS)
    return out


def _delete_before(session: Session, table: str, column: str, cut: int, span: int) -> int:
    """Delete rows older than `cut`, at most `span` of them (from the oldest) per run."""
    oldest = _oldest(session, table, column)
    if oldest is None or oldest >= cut:
        return 0
    upper = min(cut, oldest + span)
    result = session.execute(text(f"DELETE FROM {table} WHERE {column} < :upper"), {"upper": upper})
    return int(getattr(result, "rowcount", 0) or 0)


def table_bytes(session: Session) -> dict[str, int]:
    """Bytes on disk per table (PostgreSQL: with indexes and partitions; SQLite: dbstat)."""
    names = sorted(t.metadata.tables)
    if session.get_bind().dialect.name == "postgresql":
        out = {}
        for name in names:
            size = session.execute(
                text(
                    "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "WHERE c.oid = to_regclass(:n) OR c.oid IN (SELECT inhrelid FROM pg_inherits "
                    "WHERE inhparent = to_regclass(:n))"
                ),
                {"n": name},
            ).scalar()
            out[name] = int(size or 0)
        return out
    rows = session.execute(
        text("SELECT tbl_name, name FROM sqlite_master WHERE type IN ('table', 'index')")
    ).all()
    owner = {obj: tbl for tbl, obj in rows}
    sizes = dict.fromkeys(names, 0)
    stmt = text("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
    for obj, size in session.execute(stmt).all():
        tbl = owner.get(obj, obj)
        if tbl in sizes:
            sizes[tbl] += int(size or 0)
    return sizes


def run_rollups(factory: sessionmaker[Session], *, now: float | None = None) -> dict[str, int]:
    """The rollup job: minutes, then the hours they complete; each its own transaction."""
    at = time.time() if now is None else now
    out = {}
    for level in (MINUTE, HOUR):
        with unit_of_work(factory) as session:
            out[level.name] = roll_up(session, level=level, now=at)
    return out


def run_retention(
    factory: sessionmaker[Session], *, keep: Retention, now: float | None = None
) -> dict[str, int]:
    """The retention job: expired telemetry deleted (and PostgreSQL partitions made ahead)."""
    with unit_of_work(factory) as session:
        return expire(session, now=time.time() if now is None else now, keep=keep)


def retention_of(settings: Settings) -> Retention:
    """The retention the settings ask for."""
    return Retention(
        raw_days=settings.samples_raw_retention_days,
        minute_days=settings.samples_1m_retention_days,
        hour_days=settings.samples_1h_retention_days,
        partitions_ahead_days=settings.samples_partitions_ahead_days,
    )
