"""Domain errors of the timeline; web/ maps them to HTTP statuses."""

from __future__ import annotations

from typing import Any


class TimelineError(Exception):
    """Base of every timeline domain error."""


class BatchTooLarge(TimelineError):
    """A batch carries more items than the server accepts at once."""


class NotFound(TimelineError):
    """The thing asked for is not in the store."""


class StaleLeader(TimelineError):
    """This process no longer holds the leader lease (or another epoch does): it must not act."""


class InvalidBatch(TimelineError):
    """A batch breaks the contract as a whole (not JSON, a bad envelope); `errors` say where."""

    def __init__(self, errors: list[Any]) -> None:
        super().__init__(f"invalid batch: {len(errors)} error(s)")
        self.errors = errors


class NodeNotAllowed(TimelineError):
    """The batch is for a node its agent token may not write."""

    def __init__(self, node: str) -> None:
        super().__init__(f"this agent token may not write node {node!r}")
        self.node = node


class BatchConflict(TimelineError):
    """A batch_id already stored with different content: a replay that is not one."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(f"batch {batch_id!r} was already stored with different content")
        self.batch_id = batch_id


class StoreUnavailable(TimelineError):
    """The database cannot take work now (locked, full, unreachable); try again later."""

    def __init__(self, reason: str, retry_after_s: int) -> None:
        super().__init__(f"the database is unavailable ({reason}); retry in {retry_after_s} s")
        self.reason = reason
        self.retry_after_s = retry_after_s
