"""The correlator's one transaction owner: read new events and telemetry, write incidents."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import or_, text
from sqlalchemy.orm import Session, sessionmaker

from correlator import hang, idle, service
from correlator.attribution import VerdictCache, select_events
from correlator.events import EventPass
from correlator.incidents import IncidentBook, explain
from correlator.lifecycle import resolve_cleared
from correlator.models import CorrelationReport
from timeline import tables as t
from timeline.db import unit_of_work
from timeline.settings import Settings

log = logging.getLogger(__name__)

CURSOR = "events_cursor"  # {"id": last event id read, "gaps": [[lo, hi, first_seen_ts], ...]}
LAST_HANG = "hang_last_run_ts"
LAST_IDLE = "idle_last_run_ts"
LAST_RESOLVE = "resolve_last_run_ts"
TOOK = "checks_took_s"  # {LAST_HANG: seconds the last hang check took, LAST_IDLE: ...}
_LOCK_KEY = 0x466C6D43  # "FlmC": one correlator at a time across PostgreSQL replicas
_MAX_GAPS = 200
# Classifying is pure; keeping the cache across passes makes floods of one line cheap for good.
_CACHE = VerdictCache()


def _lock(session: Session) -> bool:
    if session.get_bind().dialect.name != "postgresql":
        return True  # SQLite serializes writers itself
    got = session.execute(text("select pg_try_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
    return bool(got.scalar_one())


def _read_events(
    session: Session, cursor: dict[str, Any], *, limit: int, now: float, settle_s: float
) -> list[Any]:
    """Events after the cursor, plus ids skipped earlier that may have committed since.

    On PostgreSQL ids can commit out of order; a gap below the cursor is re-read until it
    settles, so no event is lost to a slow concurrent transaction.
    """
    e = t.events
    gaps = [g for g in cursor.get("gaps", []) if now - g[2] < settle_s]
    cond = e.c.id > int(cursor.get("id", 0))
    if gaps:
        cond = or_(cond, *[e.c.id.between(g[0], g[1]) for g in gaps])
    stmt = select_events().where(cond).order_by(e.c.id).limit(limit)
    rows = list(session.execute(stmt).mappings())
    seen = {r["id"] for r in rows}
    kept = []
    for lo, hi, first in gaps:
        while lo <= hi and lo in seen:  # shrink from both ends: bounded by rows read
            lo += 1
        while hi >= lo and hi in seen:
            hi -= 1
        if lo <= hi:
            kept.append([lo, hi, first])
    last = int(cursor.get("id", 0))
    for r in rows:
        if r["id"] > last + 1:
            kept.append([last + 1, r["id"] - 1, now])
        last = max(last, r["id"])
    cursor["id"], cursor["gaps"] = last, kept[-_MAX_GAPS:]
    return rows


def correlate_once(
    session_factory: sessionmaker[Session], *, settings: Settings, now: float | None = None
) -> CorrelationReport:
    """One pass: events since the cursor -> incidents; clearing, hang and idle checks when due.

    A pass with no new event and nothing due reads two small queries and writes nothing, so the
    server can run it several times a second.
    """
    started = time.time()
    now = started if now is None else now
    report = CorrelationReport()
    with unit_of_work(session_factory) as session:
        if not _lock(session):
            report.skipped = "another replica is correlating"
            return report
        names = [CURSOR, LAST_RESOLVE, LAST_HANG, LAST_IDLE, TOOK]
        state = service.get_states(session, names=names)
        cursor = state.get(CURSOR) or {"id": 0, "gaps": []}
        before = {"id": cursor["id"], "gaps": list(cursor.get("gaps", []))}
        rows = _read_events(
            session,
            cursor,
            limit=settings.correlator_max_events,
            now=now,
            settle_s=settings.correlator_settle_s,
        )
        due = _due(state, settings=settings, now=now)
        if rows or any(due.values()) or cursor != before:
            last_idle = state.get(LAST_IDLE)
            _work(session, rows, due=due, settings=settings, now=now, report=report,
                  last_idle=None if last_idle is None else float(last_idle))  # fmt: skip
        for name, is_due in due.items():
            if is_due:
                service.set_state(session, name=name, value=now, now=now)
        if report.checks_took_s:
            took = dict(state.get(TOOK) or {}) | report.checks_took_s
            service.set_state(session, name=TOOK, value=took, now=now)
        if cursor != before:  # an idle pass writes nothing
            service.set_state(session, name=CURSOR, value=cursor, now=now)
        report.cursor = int(cursor["id"])
    report.committed_ts = time.time()
    report.duration_s = report.committed_ts - started
    return report


def _due(state: dict[str, Any], *, settings: Settings, now: float) -> dict[str, bool]:
    """Which periodic checks are due. A telemetry check that took d seconds is next due no
    sooner than d / correlator_max_share later: at a scale where its reads take seconds, it
    yields the machine to ingest rather than run back to back (and it says so in the log)."""
    intervals = {
        LAST_RESOLVE: settings.correlator_resolve_s,
        LAST_HANG: settings.hang_interval_s,
        LAST_IDLE: settings.idle_interval_s,
    }
    took = state.get(TOOK) or {}
    due = {}
    for name, iv in intervals.items():
        wait = max(iv, float(took.get(name, 0.0)) / settings.correlator_max_share)
        due[name] = now - float(state.get(name) or 0.0) >= wait
        if wait > iv and due[name]:
            log.info("%s: due every %.0f s, not %.0f s, while its reads take %.1f s",
                     name, wait, iv, float(took[name]))  # fmt: skip
    return due


def _work(
    session: Session,
    rows: list[Any],
    *,
    due: dict[str, bool],
    settings: Settings,
    now: float,
    report: CorrelationReport,
    last_idle: float | None = None,
) -> None:
    book = IncidentBook(
        service.open_incidents(session),
        dedup_window_s=settings.correlator_dedup_window_s,
        evidence_cap=settings.correlator_evidence_cap,
    )
    events = EventPass(session, book=book, settings=settings, cache=_CACHE, report=report)
    events.run(rows)
    resolved = []
    # Checking whether conditions cleared reads jobs, nodes and samples: not every pass.
    if events.running or due[LAST_RESOLVE]:
        resolved = resolve_cleared(
            session, book=book, running=events.running, settings=settings, now=now
        )
    # Every read first, then every write: SQLite's write lock is the whole database, and a
    # pass that held it through its telemetry reads starved ingest and the leader lease.
    later: list[Callable[[], None]] = []
    if due[LAST_HANG]:
        t0 = time.perf_counter()
        report.hangs_flagged = hang.detect(
            session, book=book, settings=settings, now=now, later=later
        )
        report.checks_took_s[LAST_HANG] = round(time.perf_counter() - t0, 3)
    if due[LAST_IDLE]:
        t0 = time.perf_counter()
        report.idle_opened, report.idle_resolved = idle.detect(
            session, settings=settings, now=now, last_run=last_idle, later=later
        )
        report.checks_took_s[LAST_IDLE] = round(time.perf_counter() - t0, 3)
    for write in later:
        write()
    _save(session, book, now=time.time())
    report.incidents_opened = book.opened
    report.incidents_resolved = len(resolved) + len(book.superseded)
    report.incidents_updated = len(book.changed) - report.incidents_resolved


def _save(session: Session, book: IncidentBook, *, now: float) -> None:
    changed = list(book.superseded) + list(book.changed.values())
    for inc in changed:
        inc.explanation = explain(inc)
    # Updates (resolutions) before inserts: the open-fingerprint index allows one open row each.
    service.save_incidents(session, incidents=[i for i in changed if i.id is not None], now=now)
    service.save_incidents(session, incidents=[i for i in changed if i.id is None], now=now)
