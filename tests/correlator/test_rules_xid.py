"""The Xid catalog as data and what single Xid events mean."""

from __future__ import annotations

import pytest

from correlator.rules import (
    USER_FAULT_XIDS,
    XID_CATALOG,
    classify_event,
    repeated_user_fault,
    repeated_user_fault_verdict,
    xid_info,
)
from correlator.taxonomy import Blame, Category
from timeline.models import Event, EventKind

# Real line from ../shared/fixtures/real-h100/dmesg_after_faults.txt (H100, driver 580.159.04).
REAL_XID31 = (
    "[   24.568904] NVRM: Xid (PCI:0000:00:06): 31, pid=404, name=python3, channel 0x0000000a, "
    "intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_4 faulted @ 0xdea_d0000000. "
    "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE"
)


def _xid(code: int, raw: str = "") -> Event:
    return Event(ts=0.0, source="kmsg", kind=EventKind.XID, code=code, raw=raw or f"Xid {code}")


def test_catalog_covers_every_code_nvidia_publishes_from_1_to_172() -> None:
    assert set(XID_CATALOG) == set(range(1, 173))
    assert xid_info(79) is not None
    assert xid_info(79).mnemonic == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"  # type: ignore[union-attr]
    assert xid_info(94).immediate_action == "RESTART_APP"  # type: ignore[union-attr]
    assert xid_info(95).immediate_action == "RESET_GPU"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("code", "category", "blame"),
    [
        (79, Category.GPU_HARDWARE, Blame.NODE),
        (48, Category.GPU_HARDWARE, Blame.NODE),
        (64, Category.GPU_HARDWARE, Blame.NODE),
        (95, Category.GPU_HARDWARE, Blame.NODE),
        (94, Category.GPU_HARDWARE, Blame.NODE),
        (119, Category.GPU_HARDWARE, Blame.NODE),
        (120, Category.GPU_HARDWARE, Blame.NODE),
        (62, Category.GPU_HARDWARE, Blame.NODE),
        (109, Category.GPU_HARDWARE, Blame.NODE),
        (74, Category.INTERCONNECT, Blame.NODE),
        (144, Category.INTERCONNECT, Blame.NODE),
        (150, Category.INTERCONNECT, Blame.NODE),
        (13, Category.USER_CODE, Blame.JOB),
        (31, Category.USER_CODE, Blame.JOB),
        (43, Category.USER_CODE, Blame.JOB),
    ],
)
def test_xid_maps_onto_taxonomy_as_nvidia_recommends(
    code: int, category: Category, blame: Blame
) -> None:
    verdict = classify_event(_xid(code))
    assert verdict is not None
    assert (verdict.category, verdict.blame) == (category, blame)
    assert verdict.root_cause


def test_real_h100_xid31_line_is_the_programs_fault() -> None:
    verdict = classify_event(_xid(31, REAL_XID31))
    assert verdict is not None and verdict.category is Category.USER_CODE
    assert verdict.blame is Blame.JOB


def test_xid45_is_a_consequence_not_a_cause() -> None:
    verdict = classify_event(_xid(45))
    assert verdict is not None and not verdict.root_cause
    assert verdict.category is None


def test_hardware_outranks_user_code_and_remap_pending() -> None:
    prio = {c: classify_event(_xid(c)).priority for c in (79, 95, 48, 94, 13, 63)}  # type: ignore[union-attr]
    assert prio[79] > prio[95] > prio[48] > prio[94] > prio[13] > prio[63]


def test_unknown_xid_is_unknown_and_quotes_the_raw_text() -> None:
    raw = "NVRM: Xid (PCI:0000:3b:00): 231, pid=1, something new"
    verdict = classify_event(_xid(231, raw))
    assert verdict is not None
    assert verdict.category is None and verdict.blame is Blame.UNKNOWN
    assert raw in verdict.summary


def test_xid154_follows_the_recovery_action_the_driver_names() -> None:
    raw = (
        "NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x0 (None) "
        "to 0x2 (Node Reboot Required)"
    )
    verdict = classify_event(_xid(154, raw))
    assert verdict is not None and verdict.blame is Blame.NODE
    assert "reboot" in verdict.action
    assert not verdict.root_cause  # it qualifies another Xid


def test_user_fault_on_one_gpu_across_jobs_and_users_blames_the_gpu() -> None:
    assert {13, 31, 43} == USER_FAULT_XIDS
    assert not repeated_user_fault([("1", "alice"), ("1", "alice")])
    assert not repeated_user_fault([("1", "alice"), ("2", "alice")])
    assert repeated_user_fault([("1", "alice"), ("2", "bob")])
    verdict = repeated_user_fault_verdict(31, distinct_jobs=3, distinct_users=2)
    assert (verdict.category, verdict.blame) == (Category.GPU_HARDWARE, Blame.NODE)


def test_xid45_that_names_its_cause_takes_the_causes_verdict() -> None:
    # Real line from NVIDIA/open-gpu-kernel-modules#1150 (corpus 057).
    raw = (
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 "
        "caused by previous Xid 149"
    )
    verdict = classify_event(_xid(45, raw))
    assert verdict is not None
    assert (verdict.category, verdict.blame) == (Category.INTERCONNECT, Blame.NODE)
    assert "Xid 149" in verdict.summary


def test_unused_catalog_code_is_not_guessed() -> None:
    verdict = classify_event(_xid(3, "NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007"))
    assert verdict is not None and verdict.category is None
    assert "unused" in verdict.summary.lower()
