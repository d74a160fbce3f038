"""The fleet grid's reads through the driver: inventory joined with newest samples, holders.

`queries.latest_gpu_samples` reads the inventory and `gpu_latest` apart and joins them in
Python through SQLAlchemy rows; at 10k-100k GPUs per fleet build that was most of the page's
cost. Here one LEFT JOIN runs through the driver's cursor and yields plain tuples, with the
same result (tests/timeline/test_fleet_read.py compares the two). Who holds which GPU is read
the same way (plain tuples made Holders; SQLAlchemy's row objects cost more than the query).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from timeline import tables as t
from timeline.db import driver_connection, marks
from timeline.history import Holder

_GPU_COLUMNS = frozenset(c.name for c in t.gpus.columns)
_SAMPLE_COLUMNS = frozenset(c.name for c in t.gpu_latest.columns)


def _quoted(name: str) -> str:
    # Every name comes from the table definitions (checked below), never from a request.
    return f'"{name}"'


# Each inventory GPU (`g`) to its newest sample (`l`): on the inventory's own id (revision
# 0012), through gpu_ids by uuid only where the inventory row has none.
NEWEST_SAMPLE_JOIN = (
    "LEFT JOIN gpu_latest l "
    "ON l.gpu_id = COALESCE(g.gpu_id, (SELECT i.id FROM gpu_ids i WHERE i.uuid = g.uuid))"
)


def open_allocations_sql(at: str) -> str:
    """FROM and WHERE of the allocations (`a`) open at the parameter `at` (a placeholder),
    each with its job (`j`): who holds GPUs then, on both fleet paths."""
    return (
        "FROM allocations a JOIN jobs j ON a.job_id = j.job_id AND a.scheduler = j.scheduler "
        f"WHERE a.start_ts <= {at} AND (a.end_ts IS NULL OR a.end_ts > {at})"
    )


def latest_sql(gpu_columns: Sequence[str], fields: Sequence[str]) -> str:
    """The one statement: inventory columns, then sample fields, then the sample time in s."""
    unknown = (set(gpu_columns) - _GPU_COLUMNS) | (set(fields) - _SAMPLE_COLUMNS)
    if unknown:
        raise ValueError(f"not a column: {sorted(unknown)}")
    picks = [f"g.{_quoted(c)}" for c in gpu_columns] + [f"l.{_quoted(f)}" for f in fields]
    # Seconds as a double, computed by the server: ts_ms / 1000.0 rounds the same in both.
    picks.append("CAST(l.ts_ms AS DOUBLE PRECISION) / 1000")
    return f'SELECT {", ".join(picks)} FROM gpus g {NEWEST_SAMPLE_JOIN} ORDER BY g.node, g."index"'


def _cursor(session: Session) -> Any:
    raw = driver_connection(session)
    if session.get_bind().dialect.name == "postgresql":
        # Binary results: numbers arrive as machine values, not text to parse (the same
        # Python values for these column types): fetching the 100k-GPU join took a median
        # 238 ms against 365 ms as text (6 runs each, load 4.3 on 2 cores).
        return raw.cursor(binary=True)
    return raw.cursor()


def holders_at(session: Session, *, at: float) -> list[Holder]:
    """history.holders_at through the driver (same rows): one tuple per open allocation."""
    mark = marks(session, 1)
    cur = _cursor(session)
    try:
        cur.execute(
            'SELECT a.node, a.gpu_index, a.job_id, j."user", j.account, j.partition '
            f"{open_allocations_sql(mark)} "
            # Oldest first: where two allocations claim one GPU, the newer (later) one wins.
            "ORDER BY a.start_ts, j.id",
            (at, at),
        )
        return list(map(Holder._make, cur.fetchall()))
    finally:
        cur.close()


def latest_tuples(
    session: Session, *, gpu_columns: Sequence[str], fields: Sequence[str]
) -> list[tuple[Any, ...]]:
    """Each known GPU's `gpu_columns`, newest sample's `fields` and its time `ts` in s (None
    where it has none) as one plain tuple, grouped by node and ordered by index in each."""
    cur = _cursor(session)
    try:
        cur.execute(latest_sql(gpu_columns, fields))
        rows: list[tuple[Any, ...]] = cur.fetchall()
        return rows
    finally:
        cur.close()
