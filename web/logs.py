"""Logging set-up shared by every fleetmedic process (the CLI and server worker processes)."""

from __future__ import annotations

import logging


def configure_logging(level: str | int) -> None:
    """Root logging at `level`; the pid tells server worker processes apart."""
    logging.basicConfig(
        level=level.upper() if isinstance(level, str) else level,
        format="%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s",
    )
