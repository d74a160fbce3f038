"""Query and path parameters of the read API, typed with the bounds of the boundary contract.

A node name with a NUL, an id beyond 64 bits or a NaN time is a 422 naming the parameter; the
database never sees it (PostgreSQL refuses NUL in text with an error, not an empty result).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

from timeline.bounds import INT64_MAX, NAME_PATTERN, TS_MAX, TS_MIN


def _name(max_length: int, description: str | None = None) -> Any:
    return Query(max_length=max_length, pattern=NAME_PATTERN, description=description)


def _time(description: str) -> Any:
    return Query(ge=TS_MIN, le=TS_MAX, allow_inf_nan=False, description=description)


NodeQuery = Annotated[str | None, _name(255, "node name")]
JobIdQuery = Annotated[str | None, _name(128, "job id")]
StateQuery = Annotated[str | None, _name(32, "scheduler state word, e.g. RUNNING")]
SinceQuery = Annotated[float | None, _time("UNIX seconds; default: the last hour")]
UntilQuery = Annotated[float | None, _time("UNIX seconds (exclusive)")]
JobIdPath = Annotated[str, Path(min_length=1, max_length=128, pattern=NAME_PATTERN)]
IncidentIdPath = Annotated[int, Path(ge=1, le=INT64_MAX)]


def limit_query(default: int, most: int) -> Any:
    """A `limit` parameter: 1..most rows, `default` when not given."""
    return Query(default, ge=1, le=most, description=f"rows, at most {most}")
