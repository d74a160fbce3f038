"""Helpers shared by the line parsers: length caps, PCI id normalization, flood collapsing."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from timeline.bounds import MESSAGE_MAX, PAYLOAD_MAX_BYTES, RAW_MAX, cap, check_json, clean_text
from timeline.models import Event
from timeline.pci import normalize_pci_bus_id

__all__ = [
    "MAX_LINE",
    "MAX_MESSAGE",
    "MAX_RAW",
    "FloodCollapser",
    "cap",
    "clean_line",
    "fit_payload",
    "join_raw",
    "normalize_pci_bus_id",
]

MAX_RAW = RAW_MAX  # Event.raw limit
MAX_MESSAGE = MESSAGE_MAX  # Event.message limit
MAX_LINE = 8192  # longer input lines are cut here before parsing (bounded work per line)


def clean_line(line: str) -> str:
    """One input line as the parsers take it: cut at MAX_LINE, without NUL, terminal escape
    codes or other control characters (a user's job prints what it likes), no line end."""
    return clean_text(line[:MAX_LINE]).rstrip("\r\n")


def fit_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` as it is when it fits an event's bound, else with its longest texts cut until
    it does: a MAX_LINE line can hold more bytes than the bound (quotes and backslashes JSON
    escapes, characters beyond ASCII, the line's text held twice), and a hostile line must not
    fail the parse."""
    while True:
        try:
            check_json(payload, max_bytes=PAYLOAD_MAX_BYTES)
            return payload
        except ValueError:
            texts = [k for k, v in payload.items() if isinstance(v, str) and len(v) > 64]
            if not texts:  # not a matter of length (a control character): refused as before
                raise
            key = max(texts, key=lambda k: len(payload[k]))
            payload[key] = cap(payload[key], len(payload[key]) // 2)


def join_raw(first: str | None, more: str) -> str:
    """Append one more evidence line to an event's raw text, within the raw limit."""
    return cap(f"{first}\n{more}" if first else more, MAX_RAW)


@dataclass
class _Held:
    event: Event  # the held event; with emit_first, the tracker of its repeats
    first_ts: float
    last_ts: float
    repeats_from: float | None = None  # emit_first: when the first repeat came


class FloodCollapser:
    """Collapses identical events seen within `window_s` of the first into one with a count.

    By default the event is held until its window closes (one event, full count: what a whole
    text wants). With `emit_first` (streaming sources) the first occurrence goes out at once and
    only its repeats are held; at the window's end they go out as one `repeat` event counting
    them, so an alert is never late. Memory is bounded by `max_keys`: past it the oldest held
    event is released early.
    """

    def __init__(
        self, *, window_s: float = 60.0, max_keys: int = 4096, emit_first: bool = False
    ) -> None:
        self.window_s = window_s
        self.max_keys = max_keys
        self.emit_first = emit_first
        self._held: OrderedDict[tuple[object, ...], _Held] = OrderedDict()

    @staticmethod
    def key(event: Event) -> tuple[object, ...]:
        """Identity of a line for flood purposes: kind, code, device and the stated text."""
        return (event.kind, event.code, event.pci_bus_id, event.node, event.message)

    def add(self, event: Event) -> list[Event]:
        """Hold `event` (or count it into a held twin); return events ready to go out."""
        out = self.release_older_than(event.ts - self.window_s)
        k = self.key(event)
        held = self._held.get(k)
        if held is not None:
            self._count(held, event.count, event.ts)
            return out
        if self.emit_first:
            tracker = event.model_copy(deep=True)
            tracker.count = 0  # counts repeats only; never sent while it is 0
            self._held[k] = _Held(event=tracker, first_ts=event.ts, last_ts=event.ts)
            out.append(event)
        else:
            self._held[k] = _Held(event=event, first_ts=event.ts, last_ts=event.ts)
        while len(self._held) > self.max_keys:
            out += self._release(next(iter(self._held)))
        return out

    def bump(self, key: tuple[object, ...], ts: float) -> tuple[bool, list[Event]]:
        """Count one more of the held event under `key`, if still held; cheap flood path."""
        out = self.release_older_than(ts - self.window_s)
        held = self._held.get(key)
        if held is None:
            return False, out
        self._count(held, 1, ts)
        return True, out

    def release_older_than(self, ts: float) -> list[Event]:
        """Release held events whose window started before `ts`."""
        # Held in insertion order, which is first-seen order: stop at the first younger one.
        done: list[tuple[object, ...]] = []
        for k, h in self._held.items():
            if h.first_ts >= ts:
                break
            done.append(k)
        return [e for k in done for e in self._release(k)]

    def flush(self) -> list[Event]:
        """Release everything held."""
        return [e for k in list(self._held) for e in self._release(k)]

    def held_events(self) -> list[Event]:
        """The events (or repeat trackers) held right now, oldest first."""
        return [h.event for h in self._held.values()]

    def _count(self, held: _Held, n: int, ts: float) -> None:
        held.event.count += n
        held.last_ts = max(held.last_ts, ts)
        if self.emit_first and held.repeats_from is None:
            held.repeats_from = ts

    def _release(self, k: tuple[object, ...]) -> list[Event]:
        held = self._held.pop(k)
        ev = held.event
        if ev.count == 0:
            return []  # emit_first and nothing repeated
        if self.emit_first:
            ev.payload.update(repeat=True, first_ts=held.first_ts)
            ev.ts = held.repeats_from if held.repeats_from is not None else held.last_ts
        if ev.count > 1 or self.emit_first:
            ev.payload["last_ts"] = held.last_ts
        return [ev]
