"""GPU telemetry samples: every read and write of them goes through one SampleStore.

The SQL store keeps samples in the timeline database; another backend (a time-series engine)
implements the same protocol and may ignore the session. Callers get the process's store from
`store()`; the server's wiring (or a test) picks it with `use()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session

from timeline.models import SampleRow
from timeline.settings import Settings


@dataclass(frozen=True, slots=True)
class FieldStats:
    """One field over a window: its extremes and how many samples carried it, and when."""

    min: float | None
    max: float | None
    count: int  # samples in the window where the field was not null
    first_ts: float | None  # oldest / newest sample carrying the field
    last_ts: float | None


@dataclass(frozen=True, slots=True)
class WindowStats:
    """One GPU's samples over a time window, aggregated where they are stored."""

    first_ts: float
    last_ts: float
    count: int
    fields: Mapping[str, FieldStats]


class SampleStore(Protocol):
    """Where GPU samples are written and read. Windows are [since, until] unless said."""

    # Whether appends go into the caller's SQL transaction (True) or to a store of their own
    # that dedups a replayed write (False): ingest then writes them before it takes a lock.
    in_transaction: bool

    def append(self, session: Session, *, node: str, samples: Sequence[SampleRow]) -> int:
        """Store samples (validated light rows) taken on `node`; returns how many were stored."""
        ...

    def append_many(
        self, session: Session, *, parts: Sequence[tuple[str, Sequence[SampleRow]]]
    ) -> int:
        """Store several nodes' samples ((node, rows) each) at once; returns how many."""
        ...

    def latest(
        self,
        session: Session,
        *,
        uuids: Sequence[str] | None = None,
        fields: Sequence[str] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """GPU uuid -> its newest sample (`ts` and every field, or only `fields`), for these
        GPUs or all."""
        ...

    def newest(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        fields: Sequence[str],
    ) -> dict[str, dict[str, Any]]:
        """GPU uuid -> `ts` and `fields` of its newest sample in [since, until], for the GPUs
        with one: a cheap look at the fleet's now, not a window read. The SQL store answers
        from each GPU's newest row, which may be newer than `until` (its `ts` says so);
        VictoriaMetrics answers each field's newest value in the window."""
        ...

    def window_stats(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        fields: Sequence[str],
    ) -> dict[str, WindowStats]:
        """Per GPU with samples in [since, until]: times, count and min/max of `fields`."""
        ...

    def newest_within(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        bounds: Mapping[str, tuple[float | None, float | None]],
    ) -> set[str]:
        """The GPUs (of `uuids`) whose newest value in [since, until] of each field in
        `bounds` lies within its (low, high) bounds, inclusive, None an open end: a filter
        answered where the samples are, so that a fleet-wide question costs the few GPUs
        that match. It matches what `newest` reads; the SQL store also names the GPUs whose
        newest row is newer than `until` (it cannot tell their values in the window)."""
        ...

    def field_range(
        self, session: Session, *, uuids: Sequence[str], since: float, until: float, field: str
    ) -> dict[str, tuple[float, float]]:
        """GPU uuid -> (lowest, highest) value of `field` in [since, until], for the GPUs
        with a value there: `window_stats` of one field, without its counts and times."""
        ...

    def last_above(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        field: str,
        threshold: float,
        since: float,
        until: float,
        inclusive: bool = False,
    ) -> dict[str, float]:
        """GPU uuid -> newest time in [since, until] its `field` was above (or at) threshold."""
        ...

    def series(
        self,
        session: Session,
        *,
        uuids: Sequence[str],
        since: float,
        until: float,
        bucket_s: int,
        fields: Sequence[str],
    ) -> dict[str, list[dict[str, float | None]]]:
        """Per GPU: mean of `fields` per time bucket in [since, until), bucket start as `ts`."""
        ...

    def node_utilization(
        self, session: Session, *, since: float, until: float, bucket_s: int
    ) -> list[tuple[str, float, float]]:
        """(node, bucket start, mean GPU utilization) over every node in [since, until)."""
        ...


def within(value: float | None, low: float | None, high: float | None) -> bool:
    """Whether a value is present and within [low, high] (None an open end)."""
    return value is not None and (low is None or value >= low) and (high is None or value <= high)


_store: SampleStore | None = None


def store() -> SampleStore:
    """The process's sample store (the SQL store unless `use` chose another)."""
    global _store
    if _store is None:
        from timeline.samples_sql import SqlSampleStore  # it imports this module's types

        _store = SqlSampleStore()
    return _store


def from_settings(settings: Settings) -> SampleStore:
    """The sample store `samples_backend` chooses: the SQL store (with its rollup read
    thresholds) or VictoriaMetrics."""
    if settings.samples_backend == "victoriametrics":
        import httpx

        from timeline.samples_vm import VmSampleStore
        from timeline.vm_client import VmClient

        client = httpx.Client(timeout=settings.victoriametrics_timeout_s)
        vm = VmClient(settings.victoriametrics_url, client=client)
        return VmSampleStore(
            vm,
            latest_lookback_s=settings.victoriametrics_latest_lookback_s,
            latest_recent_s=settings.victoriametrics_latest_recent_s,
        )
    from timeline.samples_sql import SqlSampleStore

    return SqlSampleStore(
        rollup_after_s=settings.samples_rollup_read_after_s,
        hourly_after_s=settings.samples_hourly_read_after_s,
    )


def use(new: SampleStore) -> SampleStore:
    """Make `new` the process's sample store; returns the one it replaces."""
    global _store
    old, _store = store(), new
    return old


__all__ = ["FieldStats", "SampleStore", "WindowStats", "from_settings", "store", "use", "within"]
