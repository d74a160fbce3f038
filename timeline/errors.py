"""Domain errors of the timeline; web/ maps them to HTTP statuses."""


class TimelineError(Exception):
    """Base of every timeline domain error."""


class BatchTooLarge(TimelineError):
    """A batch carries more items than the server accepts at once."""


class NotFound(TimelineError):
    """The thing asked for is not in the store."""


class StaleLeader(TimelineError):
    """This process no longer holds the leader lease (or another epoch does): it must not act."""
