"""Logging set-up shared by every fleetmedic process (the CLI and server worker processes).

Our own loggers log at the configured level; third-party ones (the scheduler's per-run lines,
httpx's per-request lines, uvicorn's, Alembic's) stay at WARNING unless the level is DEBUG, so
a line means something happened. `json` writes one JSON object per line for log shippers.
"""

from __future__ import annotations

import logging

from pythonjsonlogger.json import JsonFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(process)d %(name)s %(message)s"
THIRD_PARTY = (
    "apscheduler",
    "httpx",
    "httpcore",
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "alembic",
    "multipart",
    "kubernetes",
    "urllib3",
    "wandb",
)


def level_of(level: str | int) -> int:
    """A logging level from a name (any case) or number; ValueError for an unknown name."""
    if isinstance(level, int):
        return level
    value = logging.getLevelName(level.strip().upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {level!r}")
    return value


def configure_logging(level: str | int, fmt: str = "text") -> None:
    """Root logging at `level` in `fmt` (text | json); the pid tells worker processes apart."""
    numeric = level_of(level)
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter(JSON_FIELDS, rename_fields={"levelname": "level", "asctime": "time"})
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=numeric, handlers=[handler], force=True)
    quiet = logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(max(quiet, numeric))
