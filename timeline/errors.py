"""Domain errors of the timeline; web/ maps them to HTTP statuses."""


class TimelineError(Exception):
    """Base of every timeline domain error."""


class BatchTooLarge(TimelineError):
    """A batch carries more items than the server accepts at once."""


class NotFound(TimelineError):
    """The thing asked for is not in the store."""


class Conflict(TimelineError):
    """The change asked for does not fit the current state (e.g. approving a done action)."""
