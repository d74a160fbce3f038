"""PCI bus ids in one canonical form, so kernel lines, NVML and DCGM can be joined."""

from __future__ import annotations

import re

_PCI = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?$"
)


def normalize_pci_bus_id(value: str | None, *, strict: bool = False) -> str | None:
    """'00000000:3B:00.0', '0000:3b:00', '3b:00.0' all become '0000:3b:00.0'.

    Junk is kept verbatim (a source's odd id is still evidence), or None when `strict`.
    """
    if not value:
        return None if strict else value
    m = _PCI.match(value.strip())
    if not m:
        return None if strict else value
    domain = int(m["domain"] or "0", 16)
    return f"{domain:04x}:{int(m['bus'], 16):02x}:{int(m['dev'], 16):02x}.{int(m['fn'] or 0)}"
