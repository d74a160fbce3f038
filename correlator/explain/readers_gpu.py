"""Readers for GPU tool output: nvidia-smi (plain and -q), dcgmi diag (dcgm-exporter: readers_dcgm).

Each reader returns Events whose `raw` is the verbatim line(s) they read, plus the indexes of
the lines it consumed so that no other reader reports the same line again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from timeline.models import Event, EventKind, Severity
from timeline.pci import normalize_pci_bus_id


@dataclass
class ReadResult:
    """Events one reader made and the line numbers it consumed."""

    events: list[Event] = field(default_factory=list)
    claimed: set[int] = field(default_factory=set)


def _event(kind: EventKind, raw: str, message: str, **kw: object) -> Event:
    return Event(
        ts=0.0,
        source="explain",
        kind=kind,
        raw=raw[:16384],
        message=message[:4096],
        severity=Severity.ERROR,
        **kw,  # type: ignore[arg-type]
    )


# --- nvidia-smi --------------------------------------------------------------------------------

_HANDLE = re.compile(
    r"Unable to (?:determine|detect) the device handle for (?:GPU|gpu)\s*"
    r"(?P<pci>[0-9A-Fa-f]{0,8}:?[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2}(?:\.[0-7])?)?:?\s*(?P<why>.*)$"
)
_SMI_GPU_HEADER = re.compile(
    r"^GPU (?P<pci>[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$"
)
_SMI_DOC = re.compile(r"(?<!=)=+NVSMI LOG=+|^\s*Attached GPUs\s*:")
# "indent key : value" with the spaces around key and value left out. Key and value are read
# word by word (possessive) and the colon is looked for first, so that a long run of blanks
# costs linear time; a key of blanks alone is the one blank before the colon, as a lazy key was.
_KV = re.compile(
    r"^(?=[^:]*:)(?P<indent>\s*)(?P<key>[^:\s](?:\s*+[^:\s]+)*+|\s)\s*:"
    r"\s*+(?P<value>\S*+(?:\s++\S++)*+)\s*$"
)


def read_nvidia_smi(lines: list[str]) -> ReadResult:
    """'Unable to determine the device handle' lines and `nvidia-smi -q` remap/ECC sections."""
    out = ReadResult()
    pci: str | None = None
    section: list[tuple[int, str]] = []  # (indent, heading) path of -q sections
    # In a full `nvidia-smi -q` document every key:value line is read here, structurally, so
    # that status lines such as "Double Bit ECC : N/A" never reach the free-text patterns; the
    # document starts at its banner (or "Attached GPUs"), and a log pasted above it is not it.
    start = next((i for i, ln in enumerate(lines[:40]) if _SMI_DOC.search(ln)), None)
    for i, line in enumerate(lines):
        m = _HANDLE.search(line)
        if m:
            why = m.group("why").strip() or "Unknown Error"
            out.events.append(
                _event(
                    EventKind.GPU_LOST,
                    line,
                    f"nvidia-smi cannot reach the GPU: {why}",
                    pci_bus_id=normalize_pci_bus_id(m.group("pci"), strict=True),
                )
            )
            out.claimed.add(i)
            continue
        h = _SMI_GPU_HEADER.match(line.strip())
        if h:
            pci, section = normalize_pci_bus_id(h.group("pci"), strict=True), []
            continue
        if not line.strip():
            continue
        kv = _KV.match(line)
        if kv is None:  # a -q section heading such as "    Remapped Rows" has no colon
            indent, key, value = len(line) - len(line.lstrip()), line.strip(), ""
        else:
            indent, key, value = len(kv.group("indent")), kv.group("key").strip(), kv.group("value")
        if start is not None and i >= start:
            out.claimed.add(i)
        section = [(d, k) for d, k in section if d < indent]
        if value == "":
            section.append((indent, key))
            continue
        ev = _smi_q_event(section, key, value, line, pci)
        if ev is not None:
            out.events.append(ev)
            out.claimed.add(i)
    return out


def _smi_q_event(
    section: list[tuple[int, str]], key: str, value: str, line: str, pci: str | None
) -> Event | None:
    heads = [k.lower() for _, k in section]
    inside = " / ".join(heads)
    if "remapped rows" in inside or "row remapper" in inside:
        if key.lower() in ("pending", "remapping pending") and value.lower() == "yes":
            return _event(
                EventKind.ROW_REMAP,
                line,
                "Remapped rows: pending: Yes",
                pci_bus_id=pci,
                payload={"pending": True},
            )
        if key.lower().startswith("remapping failure") and value.lower() == "yes":
            return _event(
                EventKind.ROW_REMAP,
                line,
                "Remapping Failure Occurred: Yes",
                pci_bus_id=pci,
                payload={"failure": True},
            )
    volatile = "volatile" in inside and "ecc errors" in inside and value.isdigit()
    dbe_key = "uncorrectable" in key.lower() or ("double bit" in inside and key.lower() == "total")
    if volatile and dbe_key and int(value) > 0:
        return _event(
            EventKind.ECC,
            line,
            f"volatile uncorrectable ECC errors: {value}",
            pci_bus_id=pci,
            payload={"dbe": int(value)},
        )
    return _smi_q_status(inside, key, value, line, pci)


def _smi_q_status(inside: str, key: str, value: str, line: str, pci: str | None) -> Event | None:
    """-q status fields (nvidia-smi(1)): reset/recovery, page retirement, HW slowdown."""
    k, v = key.lower(), value.lower()
    needs_reset = (
        ("gpu reset status" in inside and k in ("reset required", "drain and reset recommended"))
        and v == "yes"
    ) or (k == "gpu recovery action" and v not in ("none", "n/a", "") and "deprecated" not in v)
    if needs_reset:
        return _event(
            EventKind.GPU_LOST,
            line,
            f"nvidia-smi: {key}: {value}",
            pci_bus_id=pci,
            payload={"reset_required": True},
        )
    if "retired pages" in inside and k.startswith("pending") and v == "yes":
        return _event(
            EventKind.ROW_REMAP,
            line,
            f"Retired pages: {key}: Yes",
            pci_bus_id=pci,
            payload={"pending": True, "page_retirement": True},
        )
    if k == "sram threshold exceeded" and v == "yes":
        # nvmlEccSramErrorStatus_v1_t.bThresholdExceeded: uncorrectable SRAM errors passed the
        # field-diagnostic threshold (the nvidia_smi emitter family's smi_q_sram_threshold)
        return _event(EventKind.ECC, line, f"{key}: Yes", pci_bus_id=pci)
    if k in ("hw slowdown", "hw thermal slowdown", "hw power brake slowdown") and v == "active":
        return _event(EventKind.THERMAL, line, f"{key}: Active", pci_bus_id=pci)
    return _smi_q_fabric(inside, k, value, line, pci)


# nvmlGpuFabricInfo: Status is the registration's error (nvmlReturn_t) once State is Completed,
# "N/A" before; "Not Supported" on GPUs outside an NVLink domain. Health Summary is
# NVML_GPU_FABRIC_HEALTH_SUMMARY_* (Healthy, Unhealthy, Limited Capacity, Not Supported).
_FABRIC_STATUS_OK = ("success", "n/a", "not supported", "")


def _smi_q_fabric(inside: str, k: str, value: str, line: str, pci: str | None) -> Event | None:
    """-q Fabric block (multi-node NVLink GPUs): a failed registration or an unhealthy fabric."""
    in_fabric = inside == "fabric" or inside.endswith(" / fabric")
    if in_fabric and k == "status" and value.lower() not in _FABRIC_STATUS_OK:
        return _event(
            EventKind.OTHER, line, f"nvidia-smi: GPU Fabric Status : {value}", pci_bus_id=pci
        )
    in_health = inside.endswith("fabric / health")
    if in_health and k == "summary" and value.lower() == "unhealthy":
        msg = "nvidia-smi: GPU Fabric Health Summary : Unhealthy"
        return _event(EventKind.OTHER, line, msg, pci_bus_id=pci)
    return None


# nvidia-smi's default table (nvidia-smi(1), "GPU ... Bus-Id Disp.A | Volatile Uncorr. ECC"): the
# first row of each GPU's block ends with that count; a number above 0 is what -q's "ECC Errors /
# Volatile / ... Uncorrectable" sums, "N/A" or "0" says nothing.
_SMI_TABLE_HEADER = re.compile(r"Bus-Id\s+Disp\.A\s+\|\s+Volatile Uncorr\. ECC")
_SMI_TABLE_ROW = re.compile(
    r"^\|\s{1,8}\d{1,3}\s+[^|]{1,80}\|\s+(?P<pci>[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
    r"\.[0-7])\s+(?:On|Off)\s+\|\s+(?P<ecc>\d{1,9})\s+\|\s*$"
)


def read_smi_table(lines: list[str]) -> ReadResult:
    """nvidia-smi's default table: a GPU whose Volatile Uncorr. ECC count is above 0."""
    out = ReadResult()
    if not any(_SMI_TABLE_HEADER.search(ln) for ln in lines):
        return out
    for i, line in enumerate(lines):
        m = _SMI_TABLE_ROW.match(line.strip())
        if m is None or int(m["ecc"]) == 0:
            continue
        out.events.append(
            _event(
                EventKind.ECC,
                line,
                f"volatile uncorrectable ECC errors: {m['ecc']} (nvidia-smi)",
                pci_bus_id=normalize_pci_bus_id(m["pci"], strict=True),
                payload={"dbe": int(m["ecc"])},
            )
        )
        out.claimed.add(i)
    return out


# --- dcgmi diag ---------------------------------------------------------------------------

# A cell is its text less the blanks around it: words and the blanks between them, taken
# possessively (a lazy cell between two \s* runs tried every split of a blank run, cubic).
_CELL_TEXT = r"(?:[^|\s]++(?:\s++[^|\s]++)*+)?"
_DIAG_ROW = re.compile(
    rf"^\|\s*+(?P<test>{_CELL_TEXT})\s*+\|\s*+(?P<result>{_CELL_TEXT})\s*+\|\s*+$"
)
_GPU_FAIL = re.compile(r"^(?:GPU\s*(?P<idx>\d+)\s*:\s*)?Fail\b", re.I)


def read_dcgmi_diag(lines: list[str]) -> ReadResult:
    """Failed rows of a `dcgmi diag` result table (plain text output)."""
    out = ReadResult()
    if not any("Diagnostic" in ln and "Result" in ln for ln in lines):
        return out
    test = ""
    for i, line in enumerate(lines):
        m = _DIAG_ROW.match(line.strip())
        if not m:
            continue
        if m.group("test"):
            test = m.group("test")
        f = _GPU_FAIL.match(m.group("result"))
        if f is None:
            continue
        payload: dict[str, object] = {"test": test}
        if f.group("idx") is not None:
            payload["gpu_index"] = int(f.group("idx"))
        out.events.append(
            _event(
                EventKind.OTHER, line, f"dcgmi diag: {test}: {m.group('result')}", payload=payload
            )
        )
        out.claimed.add(i)
    return out
