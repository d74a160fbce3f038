"""The kernel's EDAC corrected-error (CE) lines: which memory module, how many errors, and when
one module's errors reach mcelog's per-DIMM trigger. Shared by the agent's kernel parser (one
event a line, on a node and on `explain`'s text alike), the live correlator (correlator/edac.py)
and `explain`'s sum of those events (correlator/explain/readers_edac.py).

One CE line is a report, not a fault: ECC corrected the bit. A module that keeps correcting
errors is failing: mcelog runs its DIMM trigger when one DIMM's corrected errors reach
`ce-error-threshold`, 10 in 24 hours by default (andikleen/mcelog mcelog.conf
@075b0432b9fe3a0959de6f491165d1311e2105ad "ce-error-threshold = 10 / 24h"; leaky-bucket.c
@2ffb59e10268dee01fb0261058f491541684b49f __bucket_account: overflow when count >= capacity).
The counts one module's lines report add up as the kernel's own per-DIMM counter adds them
(drivers/edac/edac_mc.c edac_inc_ce_error: dimm->ce_count += e->error_count).

Formats (torvalds/linux drivers/edac/edac_mc.c, edac_ce_error through edac_mc_printk's
"EDAC MC%d: " prefix): "%d CE %s%son %s (%s page:0x%lx offset:0x%lx grain:%ld syndrome:0x%lx%s%s)"
since v5.10, "%d CE %s%son %s (%s %s - %s)" / "(%s %s)" before it (count, message, label,
location); kernels before 3.5 (edac_mc_handle_ce) printed "CE page 0x%lx, offset 0x%lx, grain
%d, syndrome 0x%lx, row %d, channel %d, label \"%s\": %s", one error a line. An uncorrected
error's line has the same shape (edac_ue_error: "%d UE %s%son %s (%s page:0x%lx offset:0x%lx
grain:%ld%s%s)" since v5.10, "%d UE %s%son %s (%s %s - %s)" before), so it names its module the
same way; before 3.5 edac_mc_handle_ue printed "UE page 0x%lx, offset 0x%lx, grain %d, row %d,
labels \"%s\": %s", a row and the labels of all its channels: no one module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from collector.parse.kernel_rules import Match
from timeline.models import EventKind, Severity

# mcelog's default per-DIMM corrected-error trigger: 10 errors in 24 hours
CE_THRESHOLD = 10
CE_WINDOW_S = 24 * 3600
FAULT = "edac_ce"  # the payload's "fault" of one CE line's event
# The payload's "fault" of an uncorrected hardware error of the host, one definition for the
# agent's parsers and the correlator: a machine check (an "mce:" line, kernel_node.py; an
# uncorrected GHES record, kernel_ghes.py), an EDAC UE line and a page the hardware poisoned
# (mm/memory-failure.c, kernel_node.py).
MACHINE_CHECK = "machine_check"
EDAC_UE = "edac_ue"
MEMORY_FAILURE = "memory_failure"
MACHINE_CHECKS = frozenset({MACHINE_CHECK, EDAC_UE, MEMORY_FAILURE})


def _edac_line(kind: str) -> re.Pattern[str]:
    """edac_mc.c's line of one CE or UE report: controller, count, label (the module)."""
    return re.compile(
        rf"\bEDAC (?P<mc>MC\d+): (?P<n>\d{{1,9}}) {kind} (?:[^()]{{0,200}}?\s)?on "
        r"(?P<label>[^\s()]{1,128}) \("
    )


_CE = _edac_line("CE")
_UE = _edac_line("UE")
_CE_OLD = re.compile(
    r"\bEDAC (?P<mc>MC\d+): CE page 0x[0-9a-f]+, offset 0x[0-9a-f]+, grain \d+, "
    r"syndrome 0x[0-9a-f]+, row (?P<row>\d+), channel (?P<ch>\d+)"
)


def ce_fields(text: str) -> dict[str, Any] | None:
    """The module (mc and label, or mc, row and channel), its key and the CE count of one
    EDAC CE line or message, or None."""
    if "EDAC" not in text:
        return None
    if m := _CE.search(text):
        return {
            "module": f"{m['mc']} {m['label']}",
            "mc": m["mc"],
            "label": m["label"],
            "ce_count": int(m["n"]),
        }
    if m := _CE_OLD.search(text):
        row, ch = int(m["row"]), int(m["ch"])
        return {
            "module": f"{m['mc']} row {row} channel {ch}",
            "mc": m["mc"],
            "row": row,
            "channel": ch,
            "ce_count": 1,  # edac_mc_handle_ce printed one error a line
        }
    return None


def ue_fields(text: str) -> dict[str, Any] | None:
    """The module (mc and label, keyed as `ce_fields` keys it) and the UE count of one EDAC UE
    line, or None (a line that names no one module)."""
    if "EDAC" not in text or not (m := _UE.search(text)):
        return None
    return {"module": f"{m['mc']} {m['label']}", "mc": m["mc"], "label": m["label"],
            "ue_count": int(m["n"])}  # fmt: skip


def edac_ce(msg: str) -> Match | None:
    """One EDAC CE message as a warning that names its module and count (a report: only the
    sum over a day, `most_in_a_day`, says the module is failing)."""
    fields = ce_fields(msg)
    if fields is None:
        return None
    return Match(
        EventKind.OTHER, msg, None, Severity.WARNING, None, {"text": msg, "fault": FAULT, **fields}
    )


def most_in_a_day(reports: Iterable[tuple[float | None, int]]) -> tuple[int, float]:
    """The most CE errors the (time or None, count) reports add up to within 24 hours, and
    the span they took. A report without a clock counts alone: a paste of such lines may span
    months."""
    reports = list(reports)
    best = max(((n, 0.0) for t, n in reports if t is None), default=(0, 0.0))
    timed = sorted((t, n) for t, n in reports if t is not None)
    total, first, last = busiest_day(timed)
    if timed:
        best = max(best, (total, timed[last][0] - timed[first][0]))
    return best


def busiest_day(timed: Sequence[tuple[float, int]]) -> tuple[int, int, int]:
    """The most CE errors the (time, count) reports, oldest first, add up to within 24 hours,
    and the first and last index of the reports that do (the widest such window on ties):
    the window that reached the trigger, whose reports are its evidence."""
    best, start, total = (0, 0.0, 0, 0), 0, 0
    for i, (t, n) in enumerate(timed):
        total += n
        while t - timed[start][0] > CE_WINDOW_S:
            total -= timed[start][1]
            start += 1
        if (total, t - timed[start][0]) > best[:2]:
            best = (total, t - timed[start][0], start, i)
    return best[0], best[2], best[3]


def over_threshold_message(module: str, count: int, span: float) -> str:
    """The text of one module's CE errors at or over the trigger, as the
    `edac_ce_over_dimm_threshold` rule (correlator/rules/emitters/linux_kernel.json) reads it."""
    return (
        f"EDAC corrected memory errors: {count} on {module} within {span:.0f} s, at or "
        f"over mcelog's per-DIMM ce-error-threshold of {CE_THRESHOLD} in 24 h"
    )
