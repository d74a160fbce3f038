"""One memory module's EDAC corrected-error (CE) lines, counted together.

One CE line is a report, not a fault: ECC corrected the bit, and the rules leave a lone line (or
the machine-check notice beside it) unblamed. A module whose corrected errors reach mcelog's
per-DIMM trigger (10 in 24 hours by default) is failing. The agent's kernel parser
(collector/parse/kernel_edac.py, sources there) makes one event a CE line, on `explain`'s text
and on a node alike; `findings` (reasoning.py) sums them here per host and module, as the live
correlator (correlator/edac.py) sums the store's, and one event says when a module reaches the
trigger within 24 hours by the lines' own clocks (one line alone where it has none), for the
`edac_ce_over_dimm_threshold` rule (correlator/rules/emitters/linux_kernel.json) to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collector.parse.kernel_edac import (
    CE_THRESHOLD,
    FAULT,
    most_in_a_day,
    over_threshold_message,
)
from correlator.explain.readers_gpu import _event
from timeline.models import Event, EventKind


@dataclass
class _Module:
    """One module's CE lines, each line's (time or None, CE count), and its host as the text
    spells it."""

    node: str | None = None
    lines: list[str] = field(default_factory=list)
    reports: list[tuple[float | None, int]] = field(default_factory=list)


def _storms(modules: dict[tuple[str, str], _Module]) -> list[tuple[str, str, int, float, _Module]]:
    """(host, module, count, span, lines) of each module at or over the trigger."""
    out = []
    for (host, key), module in modules.items():
        count, span = most_in_a_day(module.reports)
        if count >= CE_THRESHOLD:
            out.append((host, key, count, span, module))
    return out


def _storm_event(key: str, count: int, span: float, module: _Module) -> Event:
    raw = "\n".join(module.lines)
    return _event(EventKind.OTHER, raw, over_threshold_message(key, count, span))


def edac_ce_storms(events: list[Event]) -> list[Event]:
    """One event per host and module whose CE errors, in the parser's events
    (collector/parse/kernel_edac.py, one a CE line), reach the trigger in 24 h."""
    modules: dict[tuple[str, str], _Module] = {}
    for ev in events:
        if ev.payload.get("fault") != FAULT or not isinstance(ev.payload.get("ce_count"), int):
            continue
        where = ((ev.node or "").lower(), str(ev.payload.get("module")))
        module = modules.setdefault(where, _Module(node=ev.node))
        module.lines.append((ev.raw or ev.message).rstrip("\n"))
        # a line without its own clock counts alone (a flood of such lines too); a flood of
        # timed ones came within the parser's flood window
        n = int(ev.payload["ce_count"])
        if ev.payload.get("ts_is_uptime") and "uptime_s" not in ev.payload:
            module.reports.append((None, n))
        else:
            module.reports.append((ev.ts, n * ev.count))
    storms = []
    for _, key, count, span, module in _storms(modules):
        storm = _storm_event(key, count, span, module)
        storm.node = module.node
        storms.append(storm)
    return storms
