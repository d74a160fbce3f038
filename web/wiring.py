"""What the server runs periodically, chosen by settings: cluster sources and the correlator."""

from __future__ import annotations

import logging

from timeline.settings import Settings
from web.runtime import ServerRuntime

log = logging.getLogger(__name__)


def configure_runtime(runtime: ServerRuntime, settings: Settings) -> None:
    """Register the cluster sources and the correlator that the settings switch on."""
    log.info("no cluster sources configured")
