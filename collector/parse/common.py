"""Helpers shared by the line parsers: length caps, PCI id normalization, flood collapsing."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from timeline.models import Event
from timeline.pci import normalize_pci_bus_id

__all__ = [
    "MAX_LINE",
    "MAX_MESSAGE",
    "MAX_RAW",
    "FloodCollapser",
    "cap",
    "join_raw",
    "normalize_pci_bus_id",
]

MAX_RAW = 16384  # Event.raw limit
MAX_MESSAGE = 4096  # Event.message limit
MAX_LINE = 8192  # longer input lines are cut here before parsing (bounded work per line)


def cap(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters, marking the cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 15] + " ...[truncated]"


def join_raw(first: str | None, more: str) -> str:
    """Append one more evidence line to an event's raw text, within the raw limit."""
    return cap(f"{first}\n{more}" if first else more, MAX_RAW)


@dataclass
class _Held:
    event: Event
    first_ts: float
    last_ts: float


class FloodCollapser:
    """Collapses identical events seen within `window_s` of the first into one with a count.

    Memory is bounded by `max_keys`: past it the oldest held event is released early.
    """

    def __init__(self, *, window_s: float = 60.0, max_keys: int = 4096) -> None:
        self.window_s = window_s
        self.max_keys = max_keys
        self._held: OrderedDict[tuple[object, ...], _Held] = OrderedDict()

    @staticmethod
    def key(event: Event) -> tuple[object, ...]:
        """Identity of a line for flood purposes: kind, code, device and the stated text."""
        return (event.kind, event.code, event.pci_bus_id, event.node, event.message)

    def add(self, event: Event) -> list[Event]:
        """Hold `event` (or count it into a held twin); return events whose window closed."""
        out = self.release_older_than(event.ts - self.window_s)
        k = self.key(event)
        held = self._held.get(k)
        if held is not None:
            held.event.count += event.count
            held.last_ts = max(held.last_ts, event.ts)
            return out
        self._held[k] = _Held(event=event, first_ts=event.ts, last_ts=event.ts)
        while len(self._held) > self.max_keys:
            out.append(self._release(next(iter(self._held))))
        return out

    def bump(self, key: tuple[object, ...], ts: float) -> tuple[bool, list[Event]]:
        """Count one more of the held event under `key`, if still held; cheap flood path."""
        out = self.release_older_than(ts - self.window_s)
        held = self._held.get(key)
        if held is None:
            return False, out
        held.event.count += 1
        held.last_ts = max(held.last_ts, ts)
        return True, out

    def release_older_than(self, ts: float) -> list[Event]:
        """Release held events whose window started before `ts`."""
        # Held in insertion order, which is first-seen order: stop at the first younger one.
        done: list[tuple[object, ...]] = []
        for k, h in self._held.items():
            if h.first_ts >= ts:
                break
            done.append(k)
        return [self._release(k) for k in done]

    def flush(self) -> list[Event]:
        """Release everything held."""
        return [self._release(k) for k in list(self._held)]

    def held_events(self) -> list[Event]:
        """The events held right now (not yet released), oldest first."""
        return [h.event for h in self._held.values()]

    def _release(self, k: tuple[object, ...]) -> Event:
        held = self._held.pop(k)
        if held.event.count > 1:
            held.event.payload["last_ts"] = held.last_ts
        return held.event
