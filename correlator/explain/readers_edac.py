"""The kernel's EDAC corrected-error (CE) lines of one memory module, counted together.

One CE line is a report, not a fault: ECC corrected the bit and the rules leave a lone line (or
the machine-check notice beside it) unblamed. A module whose corrected errors reach mcelog's
per-DIMM trigger (10 in 24 hours by default) is failing; the lines, the module they name, their
counts and the windowing are read by the agent's own parser, collector/parse/kernel_edac.py
(sources there), so `explain` and the live correlator (correlator/edac.py) count alike. When one
module (the same memory controller and label, on the same host) reaches the trigger within 24
hours by the lines' own clocks (one line alone where it has none), one event says so, for the
`edac_ce_over_dimm_threshold` rule (correlator/rules/emitters/linux_kernel.json) to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collector.parse.kernel_edac import (
    CE_THRESHOLD,
    FAULT,
    ce_fields,
    most_in_a_day,
    over_threshold_message,
)
from collector.parse.kernel_prefix import split_kernel_line
from correlator.explain.hosts import host_in_line
from correlator.explain.readers_gpu import ReadResult, _event
from timeline.models import Event, EventKind


@dataclass
class _Module:
    """One module's CE lines: where they are and each line's (time or None, CE count)."""

    lines: list[str] = field(default_factory=list)
    reports: list[tuple[float | None, int]] = field(default_factory=list)
    at: list[int] = field(default_factory=list)


def _when(line: str) -> float | None:
    """The line's own time: its syslog/ISO stamp, else the kernel's seconds since boot."""
    parsed = split_kernel_line(line)
    return parsed.ts if parsed.ts is not None else parsed.uptime_s


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


def read_edac_ce(lines: list[str]) -> ReadResult:
    """One event per memory module whose CE errors reach mcelog's DIMM threshold in 24 h."""
    out = ReadResult()
    modules: dict[tuple[str, str], _Module] = {}
    for i, line in enumerate(lines):
        if (fields := ce_fields(line)) is None:
            continue
        module = modules.setdefault(
            ((host_in_line(line) or "").lower(), fields["module"]), _Module()
        )
        module.lines.append(line)
        module.at.append(i)
        module.reports.append((_when(line), fields["ce_count"]))
    for _, key, count, span, module in _storms(modules):
        out.events.append(_storm_event(key, count, span, module))
        out.claimed |= set(module.at)
    return out


def edac_ce_storms(events: list[Event]) -> list[Event]:
    """The same reading over the agent's events (collector/parse/kernel_edac.py, one a CE
    line): one event per host and module whose CE errors reach the trigger in 24 h."""
    modules: dict[tuple[str, str], _Module] = {}
    for ev in events:
        if ev.payload.get("fault") != FAULT or not isinstance(ev.payload.get("ce_count"), int):
            continue
        where = ((ev.node or "").lower(), str(ev.payload.get("module")))
        module = modules.setdefault(where, _Module())
        module.lines.append((ev.raw or ev.message).rstrip("\n"))
        # a line without its own clock counts alone, as read_edac_ce counts it (a flood of
        # such lines too); a flood of timed ones came within the parser's flood window
        n = int(ev.payload["ce_count"])
        if ev.payload.get("ts_is_uptime") and "uptime_s" not in ev.payload:
            module.reports.append((None, n))
        else:
            module.reports.append((ev.ts, n * ev.count))
    storms = []
    for host, key, count, span, module in _storms(modules):
        storm = _storm_event(key, count, span, module)
        storm.node = host or None
        storms.append(storm)
    return storms
