"""Probe set twenty-two, the host's other hardware: PCIe AER read by the failing device's driver,
EDAC/GHES memory errors, NVMe/SCSI media errors and CPU thermal throttling, under dmesg,
dmesg -T, journalctl -k, syslog and dmesg typed at a root prompt.

The formats, their sources (torvalds/linux paths and commits) and the verdicts the corpus
README's policy gives them are in tests/correlator/host_driver_formats.py; the deliveries are
nic_driver_formats.py's. A failure beside a quiet line (corrected, informational, throttled)
keeps its own reading, and a user's bug never becomes the node's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS
from tests.correlator.host_driver_formats import (
    GPU_NODE,
    HOST_FAULTS,
    HOST_QUIET,
    NODE,
    THROTTLED,
)
from tests.correlator.nic_driver_formats import DELIVERIES, NET_INFRA, block, probes

USER_BUG = "RuntimeError: CUDA error: an illegal memory access was encountered"
NCCL_WATCHDOG = (
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, "
    "OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600017 "
    "milliseconds before timing out."
)
SOFT_LOCKUP = "watchdog: BUG: soft lockup - CPU#12 stuck for 23s! [python:4242]"


@pytest.mark.parametrize(("text", "want", "node"), list(probes(HOST_FAULTS)))
def test_a_host_hardware_fault_reads_as_the_policy_says_on_the_host_that_logged_it(
    text: str, want: tuple[str | None, str], node: str | None
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == want, (text, got.explanation)
    assert got.node == node, (text, got.node)


@pytest.mark.parametrize(("text", "want", "node"), list(probes(HOST_QUIET)))
def test_a_corrected_or_informational_host_line_does_not_blame_the_node(
    text: str, want: tuple[str | None, str], node: str | None
) -> None:
    got = explain_text(text)
    assert got.blame != "node", (text, got.category, got.explanation)
    assert (got.category, got.blame) == want, (text, got.explanation)


def _throttled() -> Iterator[str]:
    for i, fmt in enumerate(THROTTLED):
        for j, level in enumerate(("Core", "Package")):
            for pre in ("", "mce: "):
                yield pre + fmt.format(cpu=(3, 17, 95)[i], level=level, n=(1, 154290)[j])


@pytest.mark.parametrize("line", list(_throttled()))
@pytest.mark.parametrize("d", range(len(DELIVERIES)))
def test_cpu_thermal_throttling_alone_is_a_weak_sign_on_the_node_never_its_blame(
    line: str, d: int
) -> None:
    got = explain_text(block([line], d, DELIVERIES[d][0]))
    assert (got.category, got.blame) == ("node", "unknown"), (line, got.explanation)


@pytest.mark.parametrize(
    ("cause", "want"),
    [
        (USER_BUG, ("user_code", "job")),
        (NCCL_WATCHDOG, ("nccl_timeout_unknown", "unknown")),
        (SOFT_LOCKUP, NODE),
    ],
)
@pytest.mark.parametrize("line", list(_throttled())[::3])
def test_thermal_throttling_beside_a_failure_leaves_the_failure_its_own_reading(
    line: str, cause: str, want: tuple[str | None, str]
) -> None:
    for text in (f"[ 10.0] {line}\n{cause}\n", f"{cause}\n[ 10.0] {line}\n"):
        got = explain_text(text)
        assert (got.category, got.blame) == want, (text, got.explanation)


# one AER report as the kernel logs it: the root port's line, then the failing device's own
_PORT = "pcieport 0000:40:01.1: AER: {sev} error received: {bdf}"
_BUS = "{drv} {bdf}: AER: PCIe Bus Error: severity={sev}, type={type}, ({agent})"
_DEV = "{drv} {bdf}: AER:   device [{ids}] error status/mask={st}/00000000"
_BIT = "{drv} {bdf}: AER:    [{bit}] {name}               (First)"
AER_DEVICES = (
    ("nvidia", "0000:41:00.0", "10de:2330", GPU_NODE),
    ("mlx5_core", "0000:41:00.0", "15b3:1021", NET_INFRA),
    ("efa", "0000:41:00.0", "1d0f:efa1", NET_INFRA),
    ("nvme", "0000:41:00.0", "144d:a80a", NODE),
)


def _aer(drv: str, bdf: str, ids: str, sev: str) -> list[str]:
    corrected = sev.startswith("Correct")
    kind = ("Physical Layer", "Receiver ID") if corrected else ("Transaction Layer", "Requester ID")
    bit = ("0", "RxErr") if corrected else ("20", "UnsupReq")
    v = {"drv": drv, "bdf": bdf, "ids": ids, "sev": sev, "type": kind[0], "agent": kind[1]}
    v.update(st="00000001" if corrected else "00100000", bit=bit[0].rjust(2), name=bit[1])
    return [x.format(**v) for x in (_PORT, _BUS, _DEV, _BIT)]


@pytest.mark.parametrize(("drv", "bdf", "ids", "want"), AER_DEVICES)
@pytest.mark.parametrize("sev", ("Uncorrectable (Fatal)", "Uncorrectable (Non-Fatal)"))
@pytest.mark.parametrize("d", range(len(DELIVERIES)))
def test_an_aer_report_blames_what_the_failing_devices_driver_says_it_is(
    drv: str, bdf: str, ids: str, want: tuple[str | None, str], sev: str, d: int
) -> None:
    lines = _aer(drv, bdf, ids, sev)
    delivery, named = DELIVERIES[d]
    got = explain_text(block(lines, d, delivery))
    assert (got.category, got.blame) == want, (lines, got.explanation)
    assert got.node == (HOSTS[d % len(HOSTS)] if named else None)


@pytest.mark.parametrize(("drv", "bdf", "ids", "want"), AER_DEVICES)
@pytest.mark.parametrize("sev", ("Correctable", "Corrected", "Multiple Correctable"))
@pytest.mark.parametrize("d", range(len(DELIVERIES)))
def test_a_corrected_aer_report_never_blames_the_node(
    drv: str, bdf: str, ids: str, want: tuple[str | None, str], sev: str, d: int
) -> None:
    lines = _aer(drv, bdf, ids, sev)
    got = explain_text(block(lines, d, DELIVERIES[d][0]))
    assert got.blame != "node", (lines, got.category, got.explanation)


@pytest.mark.parametrize("d", range(len(DELIVERIES)))
def test_machine_check_events_with_only_corrected_memory_errors_do_not_blame_the_node(
    d: int,
) -> None:
    lines = [
        "mce: [Hardware Error]: Machine check events logged",
        "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 "
        "page:0x1234 offset:0x0 grain:32 syndrome:0x0 - err_code:0x0000:0x009f)",
    ]
    got = explain_text(block(lines, d, DELIVERIES[d][0]))
    assert got.blame != "node", (lines, got.category, got.explanation)


@pytest.mark.parametrize(
    "line",
    [
        "mlx5_core 0000:41:00.0: Port module event: module 0, Cable plugged",
        "efa 0000:10:1c.0 efa_0: Failed to process command CREATE_QP (opcode 1) comp_status 3 "
        "err -22",
        "bnxt_en 0000:41:00.0: cmdq[0x4b9]=0x15 status 0x4",
        "pcieport 0000:40:01.1: AER: Correctable error received: 0000:41:00.0",
        "CPU17: Package temperature above threshold, cpu clock throttled (total events = 12)",
        "EDAC MC0: 1 CE memory read error on unknown memory (channel:0 slot:0 page:0x1 "
        "offset:0x0 grain:32 syndrome:0x0)",
        "{1}[Hardware Error]: event severity: corrected",
    ],
)
def test_a_users_bug_beside_a_quiet_driver_line_stays_the_jobs(line: str) -> None:
    for text in (f"[ 5.0] {line}\n{USER_BUG}\n", f"{USER_BUG}\n[ 5.0] {line}\n"):
        got = explain_text(text)
        assert (got.category, got.blame) == ("user_code", "job"), (text, got.explanation)
