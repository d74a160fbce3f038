"""Handing the heap that large reads freed back to the operating system.

At 100k GPUs one detector check reads answers of a hundred thousand series. CPython frees
those objects when the check ends, but glibc keeps the pages it got for them inside its arenas
for reuse. `malloc_trim(0)` after each pass that ran a check gives those pages back: up to
417 MB at a time in the 100k runs of issue #12, in at most 166 ms.

It does not make a process's RSS flat. Most of what stays is CPython's own small-object arenas
(pymalloc), each held by a few live objects, which glibc's trim cannot reach (README,
"the leader's memory"). What keeps the leader flat is running the passes in a child it
replaces (web/correlator_process.py); the child trims after its checks as well.

ctypes releases the GIL for the call, so the lease thread and the request handlers run on
while it walks the arenas. Where the C library has no `malloc_trim` (musl, macOS), nothing
is done.
"""

from __future__ import annotations

import ctypes
import logging
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

import psutil

log = logging.getLogger(__name__)

_SLOW_S = 1.0  # a trim this slow is worth a warning: it delays the next scheduled pass


@dataclass(frozen=True)
class Trim:
    """One trim: whether the C library released anything, its time and the RSS around it."""

    released: bool
    took_s: float
    rss_before_mb: float
    rss_after_mb: float


@cache
def _malloc_trim() -> Any | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc: nothing to call
        return None


def _rss_mb() -> float:
    """This process's resident set in MiB."""
    return float(psutil.Process().memory_info().rss) / 2**20


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
    log.log(level, "heap trim: RSS %.0f -> %.0f MB in %.3f s", before, result.rss_after_mb, took)
    return result
