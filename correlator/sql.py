"""Portable SQL helpers for the correlator's batched queries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, any_, bindparam
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session


def among(session: Session, column: Any, values: Iterable[Any]) -> ColumnElement[bool]:
    """`column IN values`; on PostgreSQL `column = ANY(:array)`: one parameter, not thousands
    (psycopg parses every placeholder of a query, which dominated passes with long lists)."""
    vals = sorted(set(values))
    if session.get_bind().dialect.name == "postgresql":
        return column == any_(bindparam(None, vals, type_=ARRAY(column.type)))
    return column.in_(vals)
