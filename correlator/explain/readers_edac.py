"""The kernel's EDAC corrected-error (CE) lines of one memory module, counted together.

One CE line is a report, not a fault: ECC corrected the bit and the rules leave a lone line (or
the machine-check notice beside it) unblamed. A module that keeps correcting errors is another
matter: mcelog, the daemon that accounts them, runs its DIMM trigger when one DIMM's corrected
errors reach `ce-error-threshold`, 10 in 24 hours by default (andikleen/mcelog mcelog.conf
@075b0432b9fe3a0959de6f491165d1311e2105ad "[dimm] ... execute these triggers when the rate of
corrected or uncorrected errors per DIMM exceeds the threshold ... ce-error-threshold = 10 / 24h";
leaky-bucket.c @2ffb59e10268dee01fb0261058f491541684b49f __bucket_account: overflow when
count >= capacity). The text is read here the same way: the CE counts each line reports for one
module (the same memory controller and label, on the same host) are summed as the kernel's own
per-DIMM counter sums them (edac_inc_ce_error: dimm->ce_count += e->error_count, the
dimm_ce_count that ras-mc-ctl reads), and when they reach 10 within 24 hours by the lines' own
clocks (one line alone where it has none) one event says so, for the
`edac_ce_over_dimm_threshold` rule (correlator/rules/emitters/linux_kernel.json) to read.

Formats (torvalds/linux drivers/edac/edac_mc.c, edac_ce_error through edac_mc_printk's
"EDAC MC%d: " prefix): "%d CE %s%son %s (%s page:0x%lx offset:0x%lx grain:%ld syndrome:0x%lx%s%s)"
since v5.10, "%d CE %s%son %s (%s %s - %s)" / "(%s %s)" before it (count, message, label,
location); kernels before 3.5 (edac_mc_handle_ce) printed "CE page 0x%lx, offset 0x%lx, grain
%d, syndrome 0x%lx, row %d, channel %d, label \"%s\": %s", one error a line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from collector.parse.kernel_prefix import split_kernel_line
from correlator.explain.hosts import host_in_line
from correlator.explain.readers_gpu import ReadResult, _event
from timeline.models import EventKind

# mcelog's default per-DIMM corrected-error trigger: 10 errors in 24 hours
CE_THRESHOLD = 10
CE_WINDOW_S = 24 * 3600

_CE = re.compile(
    r"\bEDAC (?P<mc>MC\d+): (?P<n>\d{1,9}) CE (?:[^()]{0,200}?\s)?on (?P<label>[^\s()]{1,128}) \("
)
_CE_OLD = re.compile(
    r"\bEDAC (?P<mc>MC\d+): CE page 0x[0-9a-f]+, offset 0x[0-9a-f]+, grain \d+, "
    r"syndrome 0x[0-9a-f]+, row (?P<row>\d+), channel (?P<ch>\d+)"
)


@dataclass
class _Module:
    """One module's CE lines: where they are and each line's (time or None, CE count)."""

    lines: list[int] = field(default_factory=list)
    reports: list[tuple[float | None, int]] = field(default_factory=list)


def _read_line(line: str) -> tuple[str, int] | None:
    """(module key, CE count) of one EDAC CE line, or None."""
    if m := _CE.search(line):
        return f"{m['mc']} {m['label']}", int(m["n"])
    if m := _CE_OLD.search(line):
        return f"{m['mc']} row {m['row']} channel {m['ch']}", 1
    return None


def _when(line: str) -> float | None:
    """The line's own time: its syslog/ISO stamp, else the kernel's seconds since boot."""
    parsed = split_kernel_line(line)
    return parsed.ts if parsed.ts is not None else parsed.uptime_s


def most_in_a_day(reports: list[tuple[float | None, int]]) -> tuple[int, float]:
    """The most CE errors the reports add up to within 24 hours, and the span they took. A
    line without a clock counts alone: a paste of such lines may span months."""
    best = max(((n, 0.0) for t, n in reports if t is None), default=(0, 0.0))
    timed = sorted((t, n) for t, n in reports if t is not None)
    start, total = 0, 0
    for t, n in timed:
        total += n
        while t - timed[start][0] > CE_WINDOW_S:
            total -= timed[start][1]
            start += 1
        best = max(best, (total, t - timed[start][0]))
    return best


def read_edac_ce(lines: list[str]) -> ReadResult:
    """One event per memory module whose CE errors reach mcelog's DIMM threshold in 24 h."""
    out = ReadResult()
    modules: dict[tuple[str, str], _Module] = {}
    for i, line in enumerate(lines):
        if "EDAC" not in line or (read := _read_line(line)) is None:
            continue
        key, count = read
        module = modules.setdefault(((host_in_line(line) or "").lower(), key), _Module())
        module.lines.append(i)
        module.reports.append((_when(line), count))
    for (_, key), module in modules.items():
        count, span = most_in_a_day(module.reports)
        if count < CE_THRESHOLD:
            continue
        raw = "\n".join(lines[i] for i in module.lines)
        message = (
            f"EDAC corrected memory errors: {count} on {key} within {span:.0f} s, at or "
            f"over mcelog's per-DIMM ce-error-threshold of {CE_THRESHOLD} in 24 h"
        )
        out.events.append(_event(EventKind.OTHER, raw, message))
        out.claimed |= set(module.lines)
    return out
