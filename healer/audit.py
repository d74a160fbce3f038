"""The audit trail of one action step: every command or API call with its outcome and duration.

Each entry goes to the sink as soon as the call returns (the healer's sink commits it at once),
so even a process killed right after a command leaves the command in the audit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from collector.slurm.runner import CommandResult, CommandRunner
from healer.models import AuditEntry

T = TypeVar("T")
Sink = Callable[[AuditEntry], None]


class Audit:
    """Records the calls of one action; `sink` persists each entry (None: kept in memory)."""

    def __init__(
        self,
        *,
        action_id: int | None = None,
        approved_by: str | None = None,
        sink: Sink | None = None,
        clock: Callable[[], float] = time.time,
        actor: str = "healer",
    ) -> None:
        self.action_id = action_id
        self.actor = actor
        self.approved_by = approved_by
        self.sink = sink
        self.clock = clock
        self.entries: list[AuditEntry] = []

    def _add(self, entry: AuditEntry) -> None:
        self.entries.append(entry)
        if self.sink is not None:
            self.sink(entry)

    def command(self, runner: CommandRunner, argv: Sequence[str], timeout: float) -> CommandResult:
        """Run a command through the injected runner and record it."""
        started = self.clock()
        t0 = time.monotonic()
        result = runner(list(argv), timeout)
        self._add(
            AuditEntry(
                action_id=self.action_id,
                ts=started,
                actor=self.actor,
                what="command",
                request=list(argv),
                rc=result.rc,
                output=result.stdout,
                error=result.stderr or (result.error or "" if not result.ok else ""),
                duration_s=time.monotonic() - t0,
                approved_by=self.approved_by,
            )
        )
        return result

    def api(
        self, method: str, path: str, body: Any, call: Callable[[], tuple[int, str]]
    ) -> tuple[int, str]:
        """Make an API call (`call` returns HTTP status and body text) and record it."""
        started = self.clock()
        t0 = time.monotonic()
        status, text = call()
        self._add(
            AuditEntry(
                action_id=self.action_id,
                ts=started,
                actor=self.actor,
                what="api",
                request={"method": method, "path": path, "body": _jsonable(body)},
                rc=status,
                output=text,
                duration_s=time.monotonic() - t0,
                approved_by=self.approved_by,
            )
        )
        return status, text

    def note(self, text: str) -> None:
        """Record a decision that made no call (e.g. 'already drained by a person')."""
        self._add(
            AuditEntry(
                action_id=self.action_id,
                ts=self.clock(),
                actor=self.actor,
                what="note",
                output=text,
                approved_by=self.approved_by,
            )
        )


def _jsonable(body: Any) -> Any:
    try:
        json.dumps(body)
        return body
    except (TypeError, ValueError):
        return str(body)
