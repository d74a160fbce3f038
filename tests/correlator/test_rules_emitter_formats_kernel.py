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
from tests.correlator.kernel_deliveries import CLOCK, DELIVERIES
from tests.correlator.kernel_formats import FORMATS, NOTHING, SERVER_NAMED

# Healthy lines that mention the same words, and corrected AER (the existing weak reading)
HEALTHY: list[tuple[str, str]] = [
    (
        "edac-register",
        "EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 "
        "IMC#0: DEV 0000:3a:0a.0 (INTERRUPT)",
    ),
    ("edac-version", "EDAC MC: Ver: 3.0.0"),
    # a corrected DIMM error: the policy is silent; edac_mc.c logs it at KERN_WARNING and the
    # controller fixed it, so an operator watches the counter rather than drains the node
    (
        "edac-ce",
        "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 "
        "slot:0 page:0x1234 offset:0x0 grain:32 syndrome:0x0 - err_code:0x0000:0x009f)",
    ),
    # a firmware-first (GHES) record the hardware corrected: cper.c's "event severity: corrected"
    ("ghes-corrected", "{3}[Hardware Error]: event severity: corrected"),
    (
        "ghes-corrected-by-hw",
        "{3}[Hardware Error]: It has been corrected by h/w and requires no further action",
    ),
    ("mce-thermal", "mce: CPU0: Thermal monitoring enabled (TM1)"),
    ("mce-decoding", "MCE: In-kernel MCE decoding enabled."),
    ("aer-enabled", "pcieport 0000:00:01.0: AER: enabled with IRQ 26"),
    ("nfs-ok", "nfs: server nfs01 OK"),
    ("ext4-mounted", "EXT4-fs (sda1): mounted filesystem with ordered data mode. Opts: (null)"),
    ("xfs-mounting", "XFS (md0): Mounting V5 Filesystem"),
    ("watchdog-nohz", "watchdog: Disabling watchdog on nohz_full cores by default"),
    ("nmi-watchdog", "NMI watchdog: Enabled. Permanently consumes one hw-PMU counter."),
    ("lustre-mounted", "Lustre: Mounted scratch-client"),
    ("hung-task-hint", '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.'),
    ("choom", "pid 4242's current OOM score adjust value: -997"),
]
# the existing reading (correlator/rules KIND_DEFAULTS[PCIE_AER]): a corrected AER error is a
# weak sign on the GPU's link with no blame, "watch the GPU's PCIe link"
CORRECTED_AER = [
    "pcieport 0000:00:03.0: AER: Corrected error message received from 0000:3b:00.0",
    "pcieport 0000:00:03.0: AER: Multiple Correctable error message received from 0000:3b:00.0",
    "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
    "nvidia 0000:c1:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, "
    "(Transmitter ID)",
]


def _deliver(line: str, i: int, delivery: str) -> str:
    clock = {k: v[i % len(v)] for k, v in CLOCK.items()}
    return delivery.format(host=HOSTS[i % len(HOSTS)], **clock) + line + "\n"


def _server(value: str) -> str:
    # "10.0.0.3@o2ib" -> "10.0.0.3" (a Lustre NID), "[fd00::5]" -> "fd00::5"
    return value.split("@")[0].strip("[]")


def _probes() -> Iterator[Any]:
    for key, fmt, values, want in FORMATS:
        for i, subs in enumerate(spread(values)):
            line = fmt.format(**subs)
            for d, (delivery, named) in enumerate(DELIVERIES):
                node = HOSTS[(i + d) % len(HOSTS)] if named else None
                if key in SERVER_NAMED:  # the server the line names, whoever printed it
                    node = _server(subs[SERVER_NAMED[key]])
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
