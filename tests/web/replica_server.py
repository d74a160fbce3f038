"""A real server replica for the failover tests: `fleetmedic serve` plus one fenced job.

The job stands in for the healer and the notifier: while this process leads, it records a row
in `probe_writes` (a table the test creates in its own scratch database), works for PROBE_WORK_S
inside the same transaction, then calls `runtime.fence` and commits. Every step goes to the
PROBE_LOG file, flushed, so the test knows when the replica is in the middle of its work.

Run: python -m tests.web.replica_server PORT (settings from FLEETMEDIC_* as for serve).
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import time
from pathlib import Path

import uvicorn
from sqlalchemy import text

from timeline.db import unit_of_work
from timeline.errors import StaleLeader
from timeline.settings import Settings
from web.app import create_app
from web.logs import configure_logging
from web.runtime import ServerRuntime
from web.wiring import configure_runtime

PROBE_WORK_S = float(os.environ.get("PROBE_WORK_S", "2.0"))
INSERT = text("INSERT INTO probe_writes (replica, epoch, seq) VALUES (:replica, :epoch, :seq)")


class FencedProbe:
    """One leader-only write per run, logged as `begin|working|committed|refused EPOCH SEQ TS`."""

    def __init__(self, runtime: ServerRuntime, replica: str, log: Path) -> None:
        self.runtime, self.replica, self.log = runtime, replica, log
        self.seq = itertools.count(1)

    def _note(self, what: str, epoch: int | None, seq: int) -> None:
        with self.log.open("a") as fh:
            fh.write(f"{what} {epoch} {seq} {time.time():.3f}\n")

    def __call__(self) -> None:
        seq, epoch = next(self.seq), self.runtime.epoch
        self._note("begin", epoch, seq)
        try:
            with unit_of_work(self.runtime.factory) as session:
                values = {"replica": self.replica, "epoch": epoch, "seq": seq}
                session.execute(INSERT, values)
                self._note("working", epoch, seq)
                time.sleep(PROBE_WORK_S)  # the work between deciding and recording it
                self.runtime.fence(session)
        except StaleLeader:
            self._note("refused", epoch, seq)
            raise
        self._note("committed", epoch, seq)


def main() -> None:
    """Serve on the port given until SIGTERM (or until the test kills the process)."""
    settings = Settings(port=int(sys.argv[1]))
    configure_logging(settings.log_level)
    # The probe's runs outlast its interval on purpose (it is mid-write most of the time).
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    probe_log = Path(os.environ["PROBE_LOG"])

    def configure(runtime: ServerRuntime, s: Settings) -> None:
        configure_runtime(runtime, s)
        probe = FencedProbe(runtime, os.environ["REPLICA_NAME"], probe_log)
        runtime.add("fenced-probe", probe, 0.05)

    app = create_app(settings, configure=configure)
    uvicorn.run(app, host="127.0.0.1", port=settings.port, log_level="warning")


if __name__ == "__main__":
    main()
