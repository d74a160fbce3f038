"""Readers for GPU tool output: nvidia-smi (plain and -q), dcgm-exporter metrics, dcgmi diag.

Each reader returns Events whose `raw` is the verbatim line(s) they read, plus the indexes of
the lines it consumed so that no other reader reports the same line again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from timeline.models import Event, EventKind, Severity


@dataclass
class ReadResult:
    """Events one reader made and the line numbers it consumed."""

    events: list[Event] = field(default_factory=list)
    claimed: set[int] = field(default_factory=set)


def normalize_pci(value: str | None) -> str | None:
    """'00000000:3B:00.0' / '0000:3b:00' / '000:BA:80.0' -> '0000:3b:00.0' (lower case)."""
    if not value:
        return None
    m = re.fullmatch(
        r"(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.([0-7]))?",
        value.strip(),
    )
    if not m:
        return None
    domain = int(m.group(1) or "0", 16)
    return f"{domain:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4) or '0'}"


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
_SMI_DOC = re.compile(r"=+NVSMI LOG=+|^\s*Attached GPUs\s*:")
_KV = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s*:\s*(?P<value>.*?)\s*$")


def read_nvidia_smi(lines: list[str]) -> ReadResult:
    """'Unable to determine the device handle' lines and `nvidia-smi -q` remap/ECC sections."""
    out = ReadResult()
    pci: str | None = None
    section: list[tuple[int, str]] = []  # (indent, heading) path of -q sections
    # In a full `nvidia-smi -q` document every key:value line is read here, structurally, so
    # that status lines such as "Double Bit ECC : N/A" never reach the free-text patterns.
    whole = any(_SMI_DOC.search(ln) for ln in lines[:40])
    for i, line in enumerate(lines):
        m = _HANDLE.search(line)
        if m:
            why = m.group("why").strip() or "Unknown Error"
            out.events.append(
                _event(
                    EventKind.GPU_LOST,
                    line,
                    f"nvidia-smi cannot reach the GPU: {why}",
                    pci_bus_id=normalize_pci(m.group("pci")),
                )
            )
            out.claimed.add(i)
            continue
        h = _SMI_GPU_HEADER.match(line.strip())
        if h:
            pci, section = normalize_pci(h.group("pci")), []
            continue
        if not line.strip():
            continue
        kv = _KV.match(line)
        if kv is None:  # a -q section heading such as "    Remapped Rows" has no colon
            indent, key, value = len(line) - len(line.lstrip()), line.strip(), ""
        else:
            indent, key, value = len(kv.group("indent")), kv.group("key").strip(), kv.group("value")
        if whole:
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
    return None


# --- dcgm-exporter -------------------------------------------------------------------------------

_METRIC = re.compile(r"^(?P<name>DCGM_FI_[A-Z0-9_]+)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def read_dcgm_metrics(lines: list[str]) -> ReadResult:
    """dcgm-exporter /metrics lines whose value shows a fault (Xid, row remap failure, DBE)."""
    out = ReadResult()
    for i, line in enumerate(lines):
        m = _METRIC.match(line.strip())
        if not m:
            continue
        out.claimed.add(i)
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        labels = dict(_LABEL.findall(m.group("labels") or ""))
        ev = _dcgm_event(m.group("name"), value, labels, line)
        if ev is not None:
            out.events.append(ev)
    return out


def _dcgm_event(name: str, value: float, labels: dict[str, str], line: str) -> Event | None:
    common: dict[str, object] = {
        "node": labels.get("Hostname") or labels.get("hostname") or None,
        "pci_bus_id": normalize_pci(labels.get("pci_bus_id")),
        "gpu_uuid": labels.get("UUID") or None,
        "payload": {
            k: v for k, v in labels.items() if k in ("gpu", "pod", "namespace", "container")
        },
    }
    if name == "DCGM_FI_DEV_XID_ERRORS" and value > 0:
        return _event(
            EventKind.XID, line, f"DCGM reports Xid {int(value)}", code=int(value), **common
        )
    if name == "DCGM_FI_DEV_ROW_REMAP_FAILURE" and value > 0:
        common["payload"] = {**common["payload"], "failure": True}  # type: ignore[dict-item]
        return _event(EventKind.ROW_REMAP, line, "DCGM reports a row remap failure", **common)
    if name in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL") and value > 0:
        common["payload"] = {**common["payload"], "dbe": int(value)}  # type: ignore[dict-item]
        return _event(
            EventKind.ECC, line, f"DCGM reports {int(value)} double-bit ECC errors", **common
        )
    return None


# --- dcgmi diag ---------------------------------------------------------------------------

_DIAG_ROW = re.compile(r"^\|\s*(?P<test>[^|]*?)\s*\|\s*(?P<result>[^|]*?)\s*\|\s*$")
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
