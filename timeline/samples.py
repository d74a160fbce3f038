"""GPU telemetry samples: every read and write of them goes through one SampleStore.

The SQL store keeps samples in the timeline database; another backend (a time-series engine)
implements the same protocol and may ignore the session. Callers get the process's store from
`store()`; the server's wiring (or a test) picks it with `use()`.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from sqlalchemy import BigInteger, ColumnElement, and_, any_, bindparam, case, cast, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from timeline import tables as t
from timeline.models import Sample


@dataclass(frozen=True, slots=True)
class FieldStats:
    """One field over a window: its extremes and how many samples carried it, and when."""

    min: float | None
    max: float | None
    count: int  # samples in the window where the field was not null
    first_ts: float | None  # oldest / newest sample carrying the field
    last_ts: float | None


@dataclass(frozen=True, slots=True)
class WindowStats:
    """One GPU's samples over a time window, aggregated where they are stored."""

    first_ts: float
    last_ts: float
    count: int
    fields: Mapping[str, FieldStats]


class SampleStore(Protocol):
    """Where GPU samples are written and read. Windows are [since, until] unless said."""

    def append(self, session: Session, *, node: str, samples: Sequence[Sample]) -> int:
        """Store samples taken on `node`; returns how many were stored."""
        ...

    def latest(self, session: Session, *, uuids: Sequence[str] | None = None) -> dict[str, dict]:
        """GPU uuid -> its newest sample (every field and `ts`), for these GPUs or all."""
        ...

    def window_stats(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        fields: Sequence[str],
    ) -> dict[str, WindowStats]:
        """Per GPU with samples in [since, until]: times, count and min/max of `fields`."""
        ...

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
        """GPU uuid -> newest time in [since, until] its `field` was above (or at) threshold."""
        ...

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
        """Per GPU: mean of `fields` per time bucket in [since, until), bucket start as `ts`."""
        ...

    def node_utilization(
        self, session: Session, *, since: float, until: float, bucket_s: int
    ) -> list[tuple[str, float, float]]:
        """(node, bucket start, mean GPU utilization) over every node in [since, until)."""
        ...


_SAMPLE_COLUMNS = tuple(Sample.model_fields)
_sample_values = operator.itemgetter(*_SAMPLE_COLUMNS)
_EXTRA = _SAMPLE_COLUMNS.index("extra")


def _among(session: Session, column: Any, values: Sequence[str]) -> ColumnElement[bool]:
    # On PostgreSQL one array parameter, not thousands of placeholders (psycopg parses each).
    vals = sorted(set(values))
    if session.get_bind().dialect.name == "postgresql":
        return column == any_(bindparam(None, vals, type_=ARRAY(column.type)))
    return column.in_(vals)


def _bucket(ts_col: Any, bucket_s: int) -> Any:
    # SQLAlchemy 2's `//` is floor division on both backends (its `/` is true division).
    return cast(ts_col, BigInteger) // bucket_s


class SqlSampleStore:
    """Samples in the timeline's own SQL database (SQLite or PostgreSQL)."""

    def append(self, session: Session, *, node: str, samples: Sequence[Sample]) -> int:
        """Insert rows straight through the driver: the hottest path.

        Core's per-row parameter processing cost more than the database itself (profiled); rows
        go as tuples through executemany (SQLite) or COPY (PostgreSQL) on the session's own
        connection, inside the caller's transaction.
        """
        if not samples:
            return 0
        rows = []
        for s in samples:
            values = list(_sample_values(s.__dict__))
            if values[_EXTRA] is not None:
                values[_EXTRA] = orjson.dumps(values[_EXTRA]).decode()
            values.append(node)
            rows.append(values)
        columns = ", ".join(f'"{c}"' for c in (*_SAMPLE_COLUMNS, "node"))
        raw = session.connection().connection.driver_connection
        assert raw is not None
        if session.get_bind().dialect.name == "postgresql":
            with raw.cursor() as cur, cur.copy(f"COPY samples ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" * (len(_SAMPLE_COLUMNS) + 1))
            cur = raw.cursor()
            try:
                cur.executemany(f"INSERT INTO samples ({columns}) VALUES ({marks})", rows)
            finally:
                cur.close()
        return len(rows)

    def latest(self, session: Session, *, uuids: Sequence[str] | None = None) -> dict[str, dict]:
        """GPU uuid -> its newest sample."""
        s = t.samples
        newest = select(s.c.gpu_uuid, func.max(s.c.ts).label("ts")).group_by(s.c.gpu_uuid)
        if uuids is not None:
            if not uuids:
                return {}
            newest = newest.where(_among(session, s.c.gpu_uuid, uuids))
        sub = newest.subquery()
        cols = [s.c.gpu_uuid, s.c.ts, *(s.c[f] for f in t.SAMPLE_FIELDS)]
        stmt = select(*cols).join(sub, and_(s.c.gpu_uuid == sub.c.gpu_uuid, s.c.ts == sub.c.ts))
        out: dict[str, dict] = {}
        for row in session.execute(stmt).mappings():
            out.setdefault(row["gpu_uuid"], dict(row))  # ties on ts: keep one row per GPU
        return out

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
        s = t.samples
        aggs: list[Any] = []
        for f in fields:
            col = s.c[f]
            with_f = case((col.is_not(None), s.c.ts))
            aggs += [func.min(col), func.max(col), func.count(col)]
            aggs += [func.min(with_f), func.max(with_f)]
        stmt = (
            select(s.c.gpu_uuid, func.min(s.c.ts), func.max(s.c.ts), func.count(), *aggs)
            .where(_among(session, s.c.gpu_uuid, uuids), s.c.ts >= since, s.c.ts <= until)
            .group_by(s.c.gpu_uuid)
        )
        out = {}
        for uuid, lo, hi, n, *rest in session.execute(stmt).all():
            per = {
                f: FieldStats(*_floats(rest[5 * i : 5 * i + 5], count_at=2))
                for i, f in enumerate(fields)
            }
            out[uuid] = WindowStats(float(lo), float(hi), int(n), per)
        return out

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
        s = t.samples
        col = s.c[field]
        above = col >= threshold if inclusive else col > threshold
        stmt = (
            select(s.c.gpu_uuid, func.max(s.c.ts))
            .where(_among(session, s.c.gpu_uuid, uuids), s.c.ts >= since, s.c.ts <= until)
            .where(above)
            .group_by(s.c.gpu_uuid)
        )
        return {u: float(ts) for u, ts in session.execute(stmt).all()}

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
        s = t.samples
        b = _bucket(s.c.ts, bucket_s).label("b")
        stmt = (
            select(s.c.gpu_uuid, b, *(func.avg(s.c[f]) for f in fields))
            .where(_among(session, s.c.gpu_uuid, uuids), s.c.ts >= since, s.c.ts < until)
            .group_by(s.c.gpu_uuid, b)
            .order_by(s.c.gpu_uuid, b)
        )
        out: dict[str, list[dict[str, float | None]]] = {u: [] for u in uuids}
        for uuid, bucket, *means in session.execute(stmt).all():
            point: dict[str, float | None] = {"ts": float(bucket) * bucket_s}
            pairs = zip(fields, means, strict=True)
            point.update((f, None if v is None else float(v)) for f, v in pairs)
            out[uuid].append(point)
        return out

    def node_utilization(
        self, session: Session, *, since: float, until: float, bucket_s: int
    ) -> list[tuple[str, float, float]]:
        """(node, bucket start, mean GPU utilization) over every node in [since, until)."""
        s = t.samples
        b = _bucket(s.c.ts, bucket_s).label("b")
        stmt = (
            select(s.c.node, b, func.avg(s.c.util_gpu))
            .where(s.c.ts >= since, s.c.ts < until)
            .group_by(s.c.node, b)
        )
        rows = session.execute(stmt).all()
        return [(n, float(bk) * bucket_s, float(u or 0.0)) for n, bk, u in rows]


def _floats(values: Sequence[Any], *, count_at: int) -> list[Any]:
    return [
        int(v or 0) if i == count_at else (None if v is None else float(v))
        for i, v in enumerate(values)
    ]


_store: SampleStore = SqlSampleStore()


def store() -> SampleStore:
    """The process's sample store (the SQL store unless `use` chose another)."""
    return _store


def use(new: SampleStore) -> SampleStore:
    """Make `new` the process's sample store; returns the one it replaces."""
    global _store
    old, _store = _store, new
    return old


__all__ = ["FieldStats", "SampleStore", "SqlSampleStore", "WindowStats", "store", "use"]
