"""PostgreSQL writes of the SQL sample store: COPY into `samples`, one upsert of `gpu_latest`.

Rows arrive built (gpu_id, ts_ms, *fields) by timeline.samples_sql, in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from psycopg import errors as pg_errors
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from timeline import tables as t
from timeline.db import driver_connection

FIELDS = t.SAMPLE_FIELDS
_EXTRA = "extra"
# a column's PostgreSQL array type, for the unnest of a batch (extra: JSON sent as text)
_PG_ARRAY = {c.name: f"{c.type.compile(dialect=postgresql.dialect())}[]" for c in t.samples.c}
_PG_ARRAY[_EXTRA] = "text[]"
# Below this many rows one INSERT ... SELECT FROM unnest costs less than COPY, which takes four
# more round trips (savepoint, copy start and end, release): an agent's batch at 10 s is one
# sample per GPU, 8 rows, and at 100k GPUs the per-batch cost is what limits the server.
COPY_FROM_ROWS = 64


def _quoted(name: str) -> str:
    return f'"{name}"'


def _printed(column: tuple[Any, ...]) -> list[Any]:
    """A column of numbers or booleans as text (None stays None).

    orjson prints a whole column in one C call, ~4x faster than str() per value (measured: 0.6
    against 2.3 ms for 11 columns of 1,000), in forms PostgreSQL reads (1.5e-7, 2.5e+16,
    true); no item holds a comma. A value it cannot print (an int past 64 bits; NaN, which it
    prints as null, were one to get past the models) takes str().
    """
    try:
        texts: list[Any] = orjson.dumps(column).decode()[1:-1].split(",")
    except orjson.JSONEncodeError:
        texts = []
    nulls = column.count(None)
    if not texts or texts.count("null") != nulls:
        return [None if v is None else str(v) for v in column]
    if nulls:
        texts = [None if v is None else s for v, s in zip(column, texts, strict=True)]
    return texts


class _Texts:
    """The rows' columns as text, each number printed once: printing 11,000 numbers was most
    of a batch's Python time here (measured), and COPY and the gpu_latest arrays share it.

    Numbers and booleans print as PostgreSQL reads them (finite by the contract).
    """

    def __init__(self, names: list[str], rows: Sequence[tuple[Any, ...]]) -> None:
        self.names = names
        self.columns: list[list[Any]] = []
        self._unnest: tuple[str, list[Any]] | None = None
        for name, column in zip(names, zip(*rows, strict=True), strict=True):
            if name == _EXTRA:  # JSON text already
                self.columns.append(list(column))
            else:
                self.columns.append(_printed(column))

    def copy_text(self) -> bytes:
        """The rows in COPY's text format, joined in C loops (psycopg's write_row per row cost
        more Python time than COPY saved in PostgreSQL, measured). JSON escapes every tab and
        newline, so `extra` needs only its backslashes doubled."""
        out = []
        for name, column in zip(self.names, self.columns, strict=True):
            if name == _EXTRA:
                column = [None if v is None else v.replace("\\", "\\\\") for v in column]
            out.append(["\\N" if v is None else v for v in column] if None in column else column)
        return ("\n".join(map("\t".join, zip(*out, strict=True))) + "\n").encode()

    def unnest(self) -> tuple[str, list[Any]]:
        """`unnest(...) WITH ORDINALITY AS r(names, n)` of the columns, and its parameters.

        Numbers go as array literals, cheaper than psycopg's dumping of 1,000-item lists
        (profiled); `extra` as a text array, cast to JSON where it is read. Built once: a small
        batch's INSERT and its gpu_latest upsert read the same arrays.
        """
        if self._unnest is not None:
            return self._unnest
        params: list[Any] = []
        for name, column in zip(self.names, self.columns, strict=True):
            if name == _EXTRA:
                params.append(column)
            elif None in column:
                params.append("{" + ",".join("NULL" if v is None else v for v in column) + "}")
            else:
                params.append("{" + ",".join(column) + "}")
        casts = ", ".join(f"%s::{_PG_ARRAY[n]}" for n in self.names)
        cols = ", ".join(map(_quoted, self.names))
        self._unnest = f"unnest({casts}) WITH ORDINALITY AS r({cols}, n)", params
        return self._unnest


def _picked(names: list[str], every: Sequence[str]) -> str:
    return ", ".join(
        f'"{n}"::json' if n == _EXTRA and n in names else f'"{n}"' if n in names else "NULL"
        for n in every
    )


def _insert_skipping_stored(raw: Any, cols: str, texts: _Texts) -> None:
    """INSERT the rows but those whose (GPU, millisecond) is stored (or earlier in the rows)."""
    source, params = texts.unnest()
    with raw.cursor() as cur:
        cur.execute(
            f"INSERT INTO samples ({cols}) SELECT {_picked(texts.names, texts.names)} "
            f"FROM {source} ORDER BY n ON CONFLICT DO NOTHING",
            params,
        )


def append(
    session: Session, rows: list[tuple[Any, ...]], newest: list[tuple[Any, ...]], fields: list[str]
) -> None:
    """Store sample rows with COPY and write `newest` (one row per GPU) over gpu_latest.

    COPY took less of PostgreSQL's time than the INSERT ... SELECT FROM unnest it replaces
    (measured) but cannot skip a row already stored: a batch holding a (GPU, millisecond)
    sample already there (resent under another batch id) falls back, inside a savepoint, to
    the statement that skips those (the first of two in one batch wins). A batch under
    COPY_FROM_ROWS rows (an agent's: one sample per GPU) takes that statement at once.
    gpu_latest is written after samples and in GPU order (`newest` comes sorted), so its row
    locks, which concurrent batches of these GPUs wait on, are taken last and in one order
    (no deadlock).
    """
    raw = driver_connection(session)
    names = ["gpu_id", "ts_ms", *fields]
    cols = ", ".join(map(_quoted, names))
    texts = _Texts(names, rows)
    if len(rows) < COPY_FROM_ROWS:
        _insert_skipping_stored(raw, cols, texts)
    else:
        try:
            # raw.transaction(): a savepoint in the session's transaction
            with (
                raw.transaction(),
                raw.cursor() as cur,
                cur.copy(f"COPY samples ({cols}) FROM STDIN") as copy,
            ):
                copy.write(texts.copy_text())
        except pg_errors.UniqueViolation:
            _insert_skipping_stored(raw, cols, texts)
    # Every GPU once, in GPU order (an agent's usual batch): the rows are the newest ones.
    latest = texts if newest == rows else _Texts(names, newest)
    source, params = latest.unnest()
    every = ["gpu_id", "ts_ms", *FIELDS]
    # The newest sample replaces the whole row: fields it lacks become NULL.
    sets = ", ".join(f'"{c}" = excluded."{c}"' for c in every[1:])
    with raw.cursor() as cur:
        cur.execute(
            f"INSERT INTO gpu_latest ({', '.join(map(_quoted, every))}) "
            f"SELECT {_picked(names, every)} FROM {source} ORDER BY n "
            f"ON CONFLICT (gpu_id) DO UPDATE SET {sets} WHERE excluded.ts_ms > gpu_latest.ts_ms",
            params,
        )
