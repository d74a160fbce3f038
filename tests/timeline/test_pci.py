"""PCI ids from NVML, the kernel and DCGM normalize to one form."""

import pytest

from timeline.pci import normalize_pci_bus_id


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("00000000:3B:00.0", "0000:3b:00.0"),  # NVML busId
        ("0000:3B:00.0", "0000:3b:00.0"),  # NVML busIdLegacy / nvidia-smi
        ("0000:3b:00", "0000:3b:00.0"),  # kernel "NVRM: Xid (PCI:0000:3b:00)"
        ("0000:00:06", "0000:00:06.0"),  # the real H100 Xid line
        ("3b:00.0", "0000:3b:00.0"),
    ],
)
def test_bus_id_forms_normalize_to_one(raw: str, canonical: str) -> None:
    assert normalize_pci_bus_id(raw) == canonical


def test_unparseable_bus_id_is_kept_verbatim() -> None:
    assert normalize_pci_bus_id("not-a-bus") == "not-a-bus"
    assert normalize_pci_bus_id(None) is None


def test_strict_normalization_turns_junk_into_none() -> None:
    assert normalize_pci_bus_id("not-a-bus", strict=True) is None
    assert normalize_pci_bus_id("", strict=True) is None
    assert normalize_pci_bus_id("0000:3B:00", strict=True) == "0000:3b:00.0"
