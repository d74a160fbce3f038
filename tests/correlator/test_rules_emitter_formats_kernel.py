"""Probe set six: the Linux kernel's own failure lines under dmesg, dmesg -T, journalctl -k, syslog.

The formats, their sources (torvalds/linux, lustre-release, util-linux paths and commits) and the
verdicts the corpus README's policy gives them are in tests/correlator/kernel_formats.py. Each
format is filled with each of its value sets and each set is delivered four ways; the host is
the journal's or syslog's host field, and plain dmesg and dmesg -T name none.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, spread
from tests.correlator.kernel_formats import CORRECTED_AER, FORMATS, HEALTHY, NOTHING

# (delivery template, whether it names the host): dmesg's "[%5lu.%06lu] ", dmesg -T's ctime,
# journalctl -k's short format, classic syslog (rsyslog) with the kernel's own clock kept
DELIVERIES = (
    ("[{up}] ", False),
    ("[{ctime}] ", False),
    ("{mon} {dd} {hms} {host} kernel: ", True),
    ("{mon} {d2} {hms} {host} kernel: [{up}] ", True),
)
_CLOCK = {
    "up": ("   12.345678", " 1234.567890", "98765.000123", "1234567.890123"),
    "ctime": ("Mon Nov  7 10:11:12 2022", "Tue Mar 12 08:14:02 2024", "Sat Jan  4 23:59:59 2025"),
    "mon": ("Nov", "Mar", "Jan"),
    "dd": ("07", "12", "04"),
    "d2": (" 7", "12", " 4"),
    "hms": ("10:11:12", "08:14:02", "23:59:59"),
}


def _deliver(line: str, i: int, delivery: str) -> str:
    clock = {k: v[i % len(v)] for k, v in _CLOCK.items()}
    return delivery.format(host=HOSTS[i % len(HOSTS)], **clock) + line + "\n"


def _probes() -> Iterator[Any]:
    for key, fmt, values, want in FORMATS:
        for i, subs in enumerate(spread(values)):
            line = fmt.format(**subs)
            for d, (delivery, named) in enumerate(DELIVERIES):
                node = HOSTS[(i + d) % len(HOSTS)] if named else None
                yield pytest.param(
                    _deliver(line, i + d, delivery), want, node, id=f"{key}-{i}-d{d}"
                )


def _controls(lines: Sequence[tuple[str, str]]) -> Iterator[Any]:
    for key, line in lines:
        for d, (delivery, _named) in enumerate(DELIVERIES):
            yield pytest.param(_deliver(line, d, delivery), id=f"{key}-d{d}")


@pytest.mark.parametrize(("text", "want", "node"), list(_probes()))
def test_a_kernel_failure_line_reads_as_the_policy_says(
    text: str, want: tuple[str | None, str], node: str | None
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == want, (text, got.explanation)
    assert got.node == node, (text, got.node)


@pytest.mark.parametrize("text", list(_controls(HEALTHY)))
def test_a_healthy_kernel_line_is_nothing_to_explain(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == NOTHING, (text, got.explanation)


@pytest.mark.parametrize(
    "text", list(_controls([(f"aer-ce{i}", x) for i, x in enumerate(CORRECTED_AER)]))
)
def test_a_corrected_aer_error_stays_a_weak_sign_on_the_gpus_link(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == ("gpu_hardware", "unknown"), (text, got.explanation)
