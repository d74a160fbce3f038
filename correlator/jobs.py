"""How the server runs the correlator: one APScheduler job calling correlate_once."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from correlator.flows import correlate_once
from correlator.models import CorrelationReport
from timeline.settings import Settings

log = logging.getLogger(__name__)
JOB_ID = "correlator"


def run_correlator(
    session_factory: sessionmaker[Session], settings: Settings
) -> CorrelationReport | None:
    """One scheduled pass; a failure is logged and the next pass retries from the cursor."""
    try:
        report = correlate_once(session_factory, settings=settings)
    except Exception:  # the scheduler must keep running; the cursor was not advanced
        log.exception("correlator pass failed; will retry from the same cursor")
        return None
    if report.incidents_opened or report.incidents_resolved:
        log.info(
            "correlator: %d events, %d incidents opened, %d resolved, %d hangs",
            report.events_read,
            report.incidents_opened,
            report.incidents_resolved,
            report.hangs_flagged,
        )
    return report


def schedule_correlator(
    scheduler: Any, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    """Add the correlator to an APScheduler (3.x) scheduler: every correlator_interval_s."""
    scheduler.add_job(
        run_correlator,
        "interval",
        seconds=settings.correlator_interval_s,
        args=[session_factory, settings],
        id=JOB_ID,
        replace_existing=True,
        max_instances=1,  # a slow pass delays the next one instead of racing it
        coalesce=True,
    )
