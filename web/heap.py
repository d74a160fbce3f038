"""Handing the heap that large reads freed back to the operating system.

At 100k GPUs one detector check reads answers of a hundred thousand series. CPython frees
those objects when the check ends, but glibc keeps the freed pages inside its arenas for
reuse: the leading worker's RSS climbed in steps at each profile and idle pass (790 MB at
minute 7 to 1,055 MB at minute 19 of a 20-minute run, issue #12) while the other worker,
which serves the same ingest without the checks, held at 265-293 MB. `malloc_trim(0)` after
each pass that ran a check gives those pages back (the same run with it ended at 808 MB).

ctypes releases the GIL for the call, so the lease thread and the request handlers run on
while it walks the arenas. Where the C library has no `malloc_trim` (musl, macOS), nothing
is done.
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

log = logging.getLogger(__name__)

_SLOW_S = 1.0  # a trim this slow is worth a warning: it delays the next scheduled pass


@dataclass(frozen=True)
class Trim:
    """One trim: whether the C library released anything, its time and the RSS around it."""

    released: bool
    took_s: float
    rss_before_mb: float | None
    rss_after_mb: float | None


@cache
def _malloc_trim() -> Any | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc: nothing to call
        return None


def _rss_mb() -> float | None:
    """This process's resident set in MB, from /proc (None where there is no /proc)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def available() -> bool:
    """Whether this C library can trim its heap (glibc's malloc_trim)."""
    return _malloc_trim() is not None


def trim() -> Trim | None:
    """Return the heap's free pages to the OS; None where the C library cannot."""
    fn = _malloc_trim()
    if fn is None:
        return None
    before, started = _rss_mb(), time.perf_counter()
    released = bool(fn(0))
    took = time.perf_counter() - started
    result = Trim(released, took, before, _rss_mb())
    level = logging.WARNING if took >= _SLOW_S else logging.INFO
    log.log(
        level,
        "heap trim: RSS %s -> %s MB in %.3f s",
        _fmt(result.rss_before_mb),
        _fmt(result.rss_after_mb),
        took,
    )
    return result


def _fmt(mb: float | None) -> str:
    return "?" if mb is None else f"{mb:.0f}"
