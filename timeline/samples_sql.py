"""The SQL sample store: compact rows in the timeline database (SQLite or PostgreSQL).

A sample row is (GPU id, integer milliseconds, values): the GPU's uuid and node live once in
`gpu_ids`. `gpu_latest` holds each GPU's newest sample, rewritten on ingest.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session

from timeline import gpu_id_cache, samples_pg, samples_read, samples_stage
from timeline import tables as t
from timeline.db import driver_connection, marks
from timeline.models import SampleRow
from timeline.samples import WindowStats, within
from timeline.samples_read import Plan, among, plan

FIELDS = t.SAMPLE_FIELDS


def _ms(ts: float) -> int:
    return round(ts * 1000)


def gpu_ids(session: Session, *, node: str, uuids: set[str]) -> dict[str, int]:
    """The integer id of each GPU uuid, adding the ones not seen before (under `node`)."""
    cached = gpu_id_cache.known(session)
    found = {u: i for u in uuids if (i := cached.get(u)) is not None}
    if len(found) == len(uuids):
        return found
    looked_up = _ids_of(session, sorted(uuids - found.keys()))
    gpu_id_cache.remember(session, looked_up)
    found.update(looked_up)
    missing = sorted(uuids - found.keys())
    if missing:
        dialect = session.get_bind().dialect.name
        verb = "INSERT OR IGNORE" if dialect == "sqlite" else "INSERT"
        tail = "" if dialect == "sqlite" else " ON CONFLICT (uuid) DO NOTHING"
        add = f"{verb} INTO gpu_ids (uuid, node) VALUES ({marks(session, 2)}){tail}"
        _executemany(session, add, [(u, node) for u in missing])
        added = _ids_of(session, missing)
        gpu_id_cache.remember(session, added)
        found.update(added)
    return found


def _ids_of(session: Session, uuids: list[str]) -> dict[str, int]:
    # Through the driver: SQLAlchemy's compiling of 1,000 IN parameters cost more than the query.
    cur = driver_connection(session).cursor()
    try:
        if session.get_bind().dialect.name == "postgresql":
            # One text parameter split by the server: psycopg's dumping of a 1,000-string
            # array cost more than the lookup (profiled). A uuid holds no newline (bounds).
            stmt = (
                "SELECT g.uuid, g.id FROM unnest(string_to_array(%s, E'\\n')) AS u(uuid) "
                "JOIN gpu_ids g ON g.uuid = u.uuid"
            )
            cur.execute(stmt, ("\n".join(uuids),))
            return dict(cur.fetchall())
        out: dict[str, int] = {}
        for i in range(0, len(uuids), 30_000):  # under SQLite's 32,766 parameters
            chunk = uuids[i : i + 30_000]
            marks = ", ".join("?" * len(chunk))
            cur.execute(f"SELECT uuid, id FROM gpu_ids WHERE uuid IN ({marks})", chunk)
            out.update(cur.fetchall())
        return out
    finally:
        cur.close()


def _executemany(session: Session, stmt: str, rows: list[Any]) -> None:
    cur = driver_connection(session).cursor()
    try:
        cur.executemany(stmt, rows)
    finally:
        cur.close()


_AT = {f: SampleRow._fields.index(f) for f in FIELDS}  # a field's position in a SampleRow
_EXTRA = "extra"
_by_gpu = operator.itemgetter(0)


def _columns(samples: Sequence[SampleRow]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The fields any sample carries and the samples' columns (every field, in row order).

    Fields no sample carries stay NULL without being bound (binding 16 NULLs a row tripled
    SQLite's insert time, measured).
    """
    cols = list(zip(*samples, strict=True))
    n = len(samples)
    return [f for f in FIELDS if cols[_AT[f]].count(None) != n], cols


def _rows(
    cols: list[tuple[Any, ...]], ids: dict[str, int], fields: list[str]
) -> list[tuple[Any, ...]]:
    """(gpu_id, ts_ms, *fields) per sample, built column-wise."""
    gpu = [ids[u] for u in cols[1]]
    ms = [round(ts * 1000) for ts in cols[0]]
    values = [cols[_AT[f]] for f in fields]
    if _EXTRA in fields:
        at = fields.index(_EXTRA)
        values[at] = tuple(None if e is None else orjson.dumps(e).decode() for e in values[at])
    return list(zip(gpu, ms, *values, strict=True))


def append(session: Session, *, node: str, samples: Sequence[SampleRow]) -> int:
    """Insert compact rows straight through the driver, and refresh gpu_latest.

    On SQLite the rows are staged (timeline.samples_stage) and moved into samples in bulk.

    Core's per-row parameter processing cost more than the database itself (profiled): rows go
    as tuples through executemany (SQLite) or COPY (PostgreSQL) on the session's connection,
    inside the caller's transaction. A second sample of one GPU in one millisecond is dropped.
    """
    if not samples:
        return 0
    fields, columns = _columns(samples)
    ids = gpu_ids(session, node=node, uuids=set(columns[1]))
    # In GPU order (stable: of two samples of one GPU in one millisecond the first still
    # wins): gpu_latest rows are then locked in one order by concurrent writers.
    rows = sorted(_rows(columns, ids, fields), key=_by_gpu)
    newest: dict[int, tuple[Any, ...]] = {}
    for row in rows:
        held = newest.get(row[0])
        if held is None or row[1] > held[1]:  # first wins, as in samples
            newest[row[0]] = row
    if session.get_bind().dialect.name == "postgresql":
        samples_pg.append(session, rows, list(newest.values()), fields)
        return len(rows)
    cols = ", ".join(f'"{c}"' for c in ("gpu_id", "ts_ms", *fields))
    holes = marks(session, len(fields) + 2)
    # Staged, not into samples: see timeline.samples_stage (a batch's index writes, deferred).
    _executemany(session, samples_stage.insert_statement(["gpu_id", "ts_ms", *fields]), rows)
    # The newest sample replaces the whole row: fields it lacks become NULL.
    sets = [f'"{f}" = excluded."{f}"' for f in ("ts_ms", *fields)]
    sets += [f'"{f}" = NULL' for f in FIELDS if f not in fields]
    _executemany(
        session,
        f"INSERT INTO gpu_latest ({cols}) VALUES ({holes}) ON CONFLICT (gpu_id) DO UPDATE "
        f"SET {', '.join(sets)} WHERE excluded.ts_ms > gpu_latest.ts_ms",
        list(newest.values()),
    )
    return len(rows)


# window_stats reads minute rollups for any window this long: their min, max, counts and first
# and last times combine exactly (partial minutes at the edges and past the rollups' mark are
# read raw). The idle check's 33-minute window over 100k GPUs read 20 M raw rows a minute.
WINDOW_ROLLUP_AFTER_S = 600.0


class SqlSampleStore:
    """Samples in the timeline's own SQL database (SQLite or PostgreSQL).

    Reads over ranges longer than `rollup_after_s` use the 1-minute rollups (longer than
    `hourly_after_s`, the 1-hour ones) plus raw rows past the rollup's watermark.
    """

    in_transaction = True  # samples are rows of the caller's transaction

    def __init__(
        self, *, rollup_after_s: float = 3600.0, hourly_after_s: float = 7 * 86400.0
    ) -> None:
        self.rollup_after_s = rollup_after_s
        self.hourly_after_s = hourly_after_s

    def append(self, session: Session, *, node: str, samples: Sequence[SampleRow]) -> int:
        """Store samples taken on `node`; returns how many were given."""
        return append(session, node=node, samples=samples)

    def append_many(
        self, session: Session, *, parts: Sequence[tuple[str, Sequence[SampleRow]]]
    ) -> int:
        """Store several nodes' samples in one write (a group commit's); returns how many."""
        if not parts:
            return 0
        for node, rows in parts:  # a GPU not seen before is registered under its own node
            gpu_ids(session, node=node, uuids={r.gpu_uuid for r in rows})
        every = [r for _, rows in parts for r in rows]
        return append(session, node=parts[0][0], samples=every)

    def latest(
        self,
        session: Session,
        *,
        uuids: Sequence[str] | None = None,
        fields: Sequence[str] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """GPU uuid -> its newest sample, from gpu_latest (no history read)."""
        g, lt = t.gpu_ids, t.gpu_latest
        names = list(FIELDS) if fields is None else [f for f in fields if f in FIELDS]
        stmt = select(g.c.uuid, lt.c.ts_ms, *(lt.c[f] for f in names))
        stmt = stmt.join(g, g.c.id == lt.c.gpu_id)
        if uuids is not None:
            if not uuids:
                return {}
            stmt = stmt.where(among(session, g.c.uuid, uuids))
        out = {}
        # Tuples, not mappings: the fleet page reads every GPU's row on each build.
        for uuid, ts_ms, *values in session.execute(stmt):
            d = dict(zip(names, values, strict=True))
            d["gpu_uuid"], d["ts"] = uuid, ts_ms / 1000.0
            out[uuid] = d
        return out

    def newest(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        fields: Sequence[str],
    ) -> dict[str, dict[str, Any]]:
        """GPU uuid -> its newest row from gpu_latest where that row is not older than `since`
        (it may be newer than `until`: gpu_latest keeps only the newest)."""
        got = self.latest(session, uuids=uuids, fields=fields) if uuids else {}
        return {u: row for u, row in got.items() if row["ts"] >= since}

    def _plan(
        self,
        session: Session,
        since: float,
        until: float,
        inclusive: bool,
        bucket_s: int = 0,
        after_s: float | None = None,
    ) -> Plan:
        return plan(
            session,
            since=since,
            until=until,
            after_s=self.rollup_after_s if after_s is None else after_s,
            hourly_after_s=self.hourly_after_s,
            inclusive=inclusive,
            bucket_s=bucket_s,
        )

    def window_stats(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        fields: Sequence[str],
    ) -> dict[str, WindowStats]:
        """Per GPU: times, count and min/max/non-null count of each field in [since, until]."""
        if not uuids:
            return {}
        after_s = min(self.rollup_after_s, WINDOW_ROLLUP_AFTER_S)
        p = self._plan(session, since, until, True, after_s=after_s)
        return samples_read.window_stats(session, p, uuids, fields)

    def newest_within(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        bounds: Mapping[str, tuple[float | None, float | None]],
    ) -> set[str]:
        """The GPUs whose newest row (from `since` on) is newer than `until`, or whose values
        in it lie within `bounds`."""
        rows = self.newest(session, uuids=uuids, since=since, until=until, fields=list(bounds))
        return {
            u
            for u, r in rows.items()
            if r["ts"] > until or all(within(r[f], lo, hi) for f, (lo, hi) in bounds.items())
        }

    def field_range(
        self, session: Session, *, uuids: Sequence[str], since: float, until: float, field: str
    ) -> dict[str, tuple[float, float]]:
        """GPU uuid -> (lowest, highest) `field` in [since, until], where it has a value."""
        got = self.window_stats(session, uuids=uuids, since=since, until=until, fields=[field])
        return {
            u: (f.min, f.max)
            for u, w in got.items()
            if (f := w.fields[field]).min is not None and f.max is not None
        }

    def last_above(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        field: str,
        threshold: float,
        since: float,
        until: float,
        inclusive: bool = False,
    ) -> dict[str, float]:
        """GPU uuid -> newest time in [since, until] its field was above (or at) threshold."""
        if not uuids:
            return {}
        p = self._plan(session, since, until, True)
        return samples_read.last_above(session, p, uuids, field, threshold, inclusive)

    def series(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        bucket_s: int,
        fields: Sequence[str],
    ) -> dict[str, list[dict[str, float | None]]]:
        """Per GPU: mean of each field per bucket in [since, until), oldest first."""
        if not uuids:
            return {}
        uuid = t.gpu_ids.c.uuid
        p = self._plan(session, since, until, False, bucket_s)
        acc = samples_read.sums(session, p, key=uuid, uuids=uuids, bucket_s=bucket_s, fields=fields)
        out: dict[str, list[dict[str, float | None]]] = {u: [] for u in uuids}
        for (gpu, bucket), sums in sorted(acc.items()):
            point: dict[str, float | None] = {"ts": float(bucket) * bucket_s}
            point.update((f, samples_read.mean(sums, i)) for i, f in enumerate(fields))
            out[gpu].append(point)
        return out

    def node_utilization(
        self, session: Session, *, since: float, until: float, bucket_s: int
    ) -> list[tuple[str, float, float]]:
        """(node, bucket start, mean GPU utilization) over every node in [since, until)."""
        p = self._plan(session, since, until, False, bucket_s)
        acc = samples_read.sums(
            session, p, key=t.gpu_ids.c.node, uuids=None, bucket_s=bucket_s, fields=["util_gpu"]
        )
        return [
            (node, float(b) * bucket_s, samples_read.mean(sums, 0) or 0.0)
            for (node, b), sums in acc.items()
        ]
