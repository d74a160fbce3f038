"""After the leader's large reads, the freed heap goes back to the OS (issue #12)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from correlator.models import CorrelationReport
from timeline.settings import Settings
from web import heap
from web.runtime import ServerRuntime
from web.wiring import configure_runtime

glibc = pytest.mark.skipif(not heap.available(), reason="the C library has no malloc_trim")


# Run in a process of its own: in a test session's process, already hundreds of MB, the chunks
# would reuse heap that earlier tests freed and the heap would not grow.
_CHUNKS = """
import json
from web import heap
base = heap._rss_mb()
# 2 KiB objects live in glibc's heap (not pymalloc's); one in 16 kept alive pins every
# page range, so freeing the rest leaves free pages that glibc keeps unless trimmed.
chunks = [bytes(2048) + bytes([i % 251]) for i in range(40_000)]
kept = chunks[15::16]
grown = heap._rss_mb()
del chunks
done = heap.trim()
print(json.dumps({"base": base, "grown": grown, "kept": len(kept),
                  "before": done and done.rss_before_mb, "after": done and done.rss_after_mb}))
"""


@glibc
def test_a_trim_returns_the_pages_freed_between_live_chunks() -> None:
    run = subprocess.run(
        [sys.executable, "-c", _CHUNKS], capture_output=True, text=True, check=True, timeout=60
    )
    got = json.loads(run.stdout.splitlines()[-1])
    base, grown = got["base"], got["grown"]
    assert grown - base > 40
    assert got["before"] is not None and got["after"] is not None
    assert got["before"] - got["after"] > (grown - base) / 2
    assert got["kept"] == 2500


def test_trim_does_nothing_where_the_c_library_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.trim() is None
    assert not heap.available()


@glibc
def test_a_slow_trim_is_logged_as_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(heap, "_SLOW_S", 0.0)
    with caplog.at_level(logging.INFO, logger="web.heap"):
        assert heap.trim() is not None
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "heap trim: RSS" in caplog.records[0].getMessage()


def _correlate_with(
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    engine: Engine,
    report: CorrelationReport | None,
) -> int:
    """Run the server's correlator job once on a canned report; how many trims followed."""
    import correlator.jobs

    trims: list[int] = []
    monkeypatch.setattr(correlator.jobs, "run_correlator", lambda *_a, **_k: report)
    monkeypatch.setattr(heap, "trim", lambda: trims.append(1))
    settings.correlator_process = False  # the leader's own passes (in a child, the child trims)
    runtime = ServerRuntime(sessionmaker(bind=engine))
    configure_runtime(runtime, settings)
    runtime.jobs["correlator"]()
    return len(trims)


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_the_leader_trims_after_a_pass_that_ran_a_check(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, engine: Engine
) -> None:
    ran = CorrelationReport(checks_took_s={"hang": 0.5})
    assert _correlate_with(monkeypatch, settings, engine, ran) == 1
    assert _correlate_with(monkeypatch, settings, engine, CorrelationReport()) == 0
    assert _correlate_with(monkeypatch, settings, engine, None) == 0
    settings.correlator_trim_heap = False
    assert _correlate_with(monkeypatch, settings, engine, ran) == 0
