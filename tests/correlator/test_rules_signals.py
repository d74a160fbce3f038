"""The signal and exit-code reasoner: what a process's end says, and how sure it makes us."""

from __future__ import annotations

import pytest

from correlator.rules import signals
from correlator.taxonomy import Blame, Category


@pytest.mark.parametrize(
    ("code", "signal", "shell"),
    [(-9, None, False), (137, None, True), (None, "Killed", False), (None, "SIGKILL", False)],
)
def test_a_bare_sigkill_reads_as_likely_host_oom_with_blame_unknown_and_says_why(
    code: int | None, signal: str | None, shell: bool
) -> None:
    v = signals.verdict_from(code, signal, shell=shell)
    assert v is not None
    assert (v.category, v.blame) == (Category.OOM_HOST, Blame.UNKNOWN)
    assert v.confidence < 0.5 and not v.root_cause  # any other recognised error outranks it
    assert "OOM killer" in v.summary and "SIGKILL" in v.summary


@pytest.mark.parametrize(
    ("code", "signal"), [(-11, None), (139, None), (None, "Segmentation fault")]
)
def test_a_crash_signal_is_the_programs(code: int | None, signal: str | None) -> None:
    v = signals.verdict_from(code, signal, shell=True)
    assert v is not None and (v.category, v.blame) == (Category.USER_CODE, Blame.JOB)


def test_sigterm_is_a_consequence_not_a_cause() -> None:
    v = signals.verdict_from(-15)
    assert v is not None and v.category is None and v.blame is Blame.UNKNOWN


def test_sigbus_points_at_shared_memory() -> None:
    v = signals.verdict_from(None, "Bus error")
    assert v is not None and v.category is Category.OOM_HOST and "/dev/shm" in v.summary


@pytest.mark.parametrize("status", [1, 2, 28, 127])
def test_a_plain_non_zero_exit_is_the_job_reporting_its_own_failure(status: int) -> None:
    v = signals.verdict_from(status)
    assert v is not None and (v.category, v.blame) == (Category.USER_CODE, Blame.JOB)


def test_exit_zero_and_nothing_captured_say_nothing() -> None:
    assert signals.verdict_from(0) is None
    assert signals.verdict_from(None, None) is None


def test_137_is_a_signal_only_where_the_shell_convention_applies() -> None:
    v = signals.verdict_from(137, shell=False)
    assert v is not None and v.category is Category.USER_CODE  # a program may exit 137 itself
