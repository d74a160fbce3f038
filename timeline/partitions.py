"""PostgreSQL's daily partitions of `samples`: made ahead of time, dropped when expired.

Alembic owns the schema: the partitioned `samples` table and its DEFAULT partition. The day
partitions are data lifecycle, not schema: a leader job creates tomorrow's before it is needed
and drops whole days past retention (far cheaper than DELETE). Rows no day partition covers
(clock skew, a late backfill) land in the DEFAULT partition; a day made later takes its rows over.
"""

from __future__ import annotations

import calendar
import re
import time
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

DAY_MS = 86_400_000
PARENT = "samples"
DEFAULT = "samples_default"
_DAY_NAME = re.compile(r"^samples_p(\d{8})$")


def partition_name(day: int) -> str:
    """The name of the partition holding day number `day` (days since the epoch, UTC)."""
    return "samples_p" + time.strftime("%Y%m%d", time.gmtime(day * 86400))


def is_partition(name: str) -> bool:
    """True for the names of `samples`' partitions (made at run time, not by migrations)."""
    return name == DEFAULT or _DAY_NAME.match(name) is not None


# Columns that only PostgreSQL's schema has (revision 0014: the fleet grid's generated node
# columns, read by timeline.fleet_cells alone); the table definitions serve both backends.
POSTGRES_ONLY_COLUMNS = frozenset({("nodes", "grid_group"), ("nodes", "drained_by")})


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic autogenerate filter: leave out the day partitions, which no migration makes,
    and PostgreSQL's own generated columns, which the shared table definitions lack.

    PostgreSQL reports each partition as a table of its own; without this filter autogenerate
    would propose dropping every day of telemetry.
    """
    if not reflected or compare_to is not None:
        return True
    if type_ == "table":
        return not is_partition(name or "")
    if type_ == "column":
        return (getattr(obj.table, "name", None), name) not in POSTGRES_ONLY_COLUMNS
    return True


def _existing(session: Session) -> dict[int, str]:
    stmt = text(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_class p ON p.oid = i.inhparent "
        "WHERE p.relname = :parent AND pg_table_is_visible(p.oid)"
    )
    out = {}
    for (name,) in session.execute(stmt, {"parent": PARENT}):
        m = _DAY_NAME.match(name)
        if m:
            out[calendar.timegm(time.strptime(m.group(1), "%Y%m%d")) // 86400] = name
    return out


def ensure_partitions(session: Session, *, now: float, ahead_days: int) -> list[str]:
    """Create the day partitions from today to `ahead_days` ahead; returns those created.

    A day whose rows already sit in the DEFAULT partition takes them over before it attaches.
    """
    if session.get_bind().dialect.name != "postgresql":
        return []
    have = _existing(session)
    today = int(now // 86400)
    made = []
    for day in range(today, today + ahead_days + 1):
        if day in have:
            continue
        name, lo, hi = partition_name(day), day * DAY_MS, (day + 1) * DAY_MS
        session.execute(text(f"CREATE TABLE {name} (LIKE {PARENT} INCLUDING DEFAULTS)"))
        session.execute(
            text(
                f"WITH moved AS (DELETE FROM {DEFAULT} WHERE ts_ms >= :lo AND ts_ms < :hi "
                f"RETURNING *) INSERT INTO {name} SELECT * FROM moved"
            ),
            {"lo": lo, "hi": hi},
        )
        session.execute(
            text(f"ALTER TABLE {PARENT} ATTACH PARTITION {name} FOR VALUES FROM ({lo}) TO ({hi})")
        )
        made.append(name)
    return made


def drop_expired(session: Session, *, before_ms: int) -> list[str]:
    """Drop day partitions wholly older than `before_ms`, and such rows of DEFAULT."""
    if session.get_bind().dialect.name != "postgresql":
        return []
    dropped = []
    for day, name in sorted(_existing(session).items()):
        if (day + 1) * DAY_MS <= before_ms:
            session.execute(text(f"DROP TABLE {name}"))
            dropped.append(name)
    session.execute(text(f"DELETE FROM {DEFAULT} WHERE ts_ms < :cut"), {"cut": before_ms})
    return dropped
