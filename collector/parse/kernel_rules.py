"""Recognizers for kernel messages that matter to GPU nodes (NVRM, NVSwitch, AER, OOM).

Each returns a `Match` (kind, code, severity as the text states it, parsed fields) or None.
They read only the message, never the time prefix (see kernel_prefix).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.parse.common import normalize_pci_bus_id
from timeline.models import EventKind, Severity

_PCI_IN = r"(?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"


@dataclass
class Match:
    """What a recognizer read from one message."""

    kind: EventKind
    message: str
    code: int | None = None
    severity: Severity = Severity.ERROR
    pci_raw: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def pci_bus_id(self) -> str | None:
        """The PCI id in canonical form (`0000:3b:00.0`)."""
        return normalize_pci_bus_id(self.pci_raw)


# --- NVRM Xid -------------------------------------------------------------------------------

# From the first 'NVRM: Xid (' after a ')' (or the start) only ((?<![^)])(?>[^)]*?...)): every
# later one before the next ')' has the same device text and the same rest, so it matches only
# when the first does, and retrying each of them on a line that repeats it was quadratic.
_XID = re.compile(
    r"(?<![^)])(?>[^)]*?NVRM: Xid \()(?P<dev>[^)]*+)\):\s*+(?P<code>\d++)(?:,\s*(?P<rest>.*))?$"
)
_PID = re.compile(r"\bpid=(?P<pid>'[^']*'|\S+?)(?:,\s*|\s+|$)")
_NAME = re.compile(r"\bname=(?P<name>.*?)(?:,\s*|$)")
_CHANNEL = re.compile(r"\b(?:channel|Ch) (?:0x)?(?P<ch>[0-9a-fA-F]+)(?:,\s*|\s+|$)")
_INTR = re.compile(r"\bintr (?P<intr>[0-9a-fA-F]+)\.?\s*")
_CAUSED_BY = re.compile(r"caused by previous Xid (?P<prev>\d+)")
_PCI_ANY = re.compile(_PCI_IN)


def _xid(msg: str) -> Match | None:
    m = _XID.search(msg)
    if not m:
        return None
    code = int(m["code"])
    rest = m["rest"] or ""
    payload: dict[str, Any] = {"xid": code}
    dev = m["dev"]
    pm = _PCI_ANY.search(dev)
    for key, pat in (("gpu_instance", r"GPU-I:(\w+)"), ("compute_instance", r"GPU-C:(\w+)")):
        if im := re.search(pat, dev):
            payload[key] = im.group(1)
    text = rest
    if pid := _PID.search(text):
        value = pid["pid"].strip("'")
        payload["pid"] = int(value) if value.isdigit() else None
        text = text.replace(pid.group(0), "", 1)
    if name := _NAME.search(text):
        value = name["name"].strip()
        payload["process_name"] = None if value == "<unknown>" else value
        text = text.replace(name.group(0), "", 1)
    if ch := _CHANNEL.search(text):
        payload["channel"] = "0x" + ch["ch"].lower()
        text = text.replace(ch.group(0), "", 1)
    if intr := _INTR.search(text):
        payload["intr"] = intr["intr"]
        text = text.replace(intr.group(0), "", 1)
    text = text.strip(" ,")
    if cb := _CAUSED_BY.search(text):
        payload["caused_by_xid"] = int(cb["prev"])
    payload["text"] = text
    pci_raw = pm["pci"] if pm else (dev or None)
    where = f" on {pci_raw}" if pci_raw else ""
    return Match(
        EventKind.XID,
        f"Xid {code}{where}: {text}".rstrip(": "),
        code,
        Severity.ERROR,
        pci_raw,
        payload,
    )


# --- NVSwitch SXid --------------------------------------------------------------------------

_SXID = re.compile(
    # the first 'nvidia-nvswitchN: SXid (' after a ')' only, as _XID
    r"(?<![^)])(?>[^)]*?(?P<sw>nvidia-nvswitch\d*+): SXid \()(?P<dev>[^)]*+)\):\s*+(?P<code>\d++),"
    r"\s*(?P<rest>.*)$"
)


def _sxid(msg: str) -> Match | None:
    m = _SXID.search(msg)
    if not m:
        return None
    code, rest = int(m["code"]), m["rest"].strip()
    payload: dict[str, Any] = {"sxid": code, "switch": m["sw"], "text": rest}
    sev = Severity.ERROR
    if re.match(r"Non-?fatal", rest, re.I):
        payload["fatal"], sev = False, Severity.WARNING
    elif re.match(r"Fatal", rest, re.I):
        payload["fatal"], sev = True, Severity.CRITICAL
    else:
        payload["detail"] = True  # "Data {...}" / "Severity 0 Engine instance ..." follow-on lines
        sev = Severity.INFO
    if link := re.search(r"\bLink (\d+)", rest):
        payload["link"] = int(link.group(1))
    pm = _PCI_ANY.search(m["dev"])
    pci_raw = pm["pci"] if pm else None
    return Match(EventKind.SXID, f"SXid {code} on {m['sw']}: {rest}", code, sev, pci_raw, payload)


# --- GPU lost, GSP, RmInitAdapter, NVLink ---------------------------------------------------

_FALLEN = [
    re.compile(r"NVRM: GPU at " + _PCI_IN + r":? has fallen off the bus"),
    re.compile(r"NVRM: GPU " + _PCI_IN + r": GPU has fallen off the bus"),
    re.compile(
        r"NVRM: The NVIDIA GPU " + _PCI_IN + r"\s*(?:NVRM:\s*)?\(PCI ID: (?P<pciid>[0-9a-fA-F:]+)\)"
        r".*fallen off the bus"
    ),
    # (?<![^\n])(?>[^\n]*?X): from the first X of a line only. A failure there is a failure from
    # every later X (the .* after it reaches past them), and retrying each X of a line that
    # repeats it was quadratic; these patterns' spans are not used.
    re.compile(
        r"(?<![^\n])(?>[^\n]*?NVRM: )(?:.*\s)?fallen off the bus and is not responding to commands"
    ),
]
_GSP = [
    re.compile(
        r"Timeout after (?P<secs>\d+)s of waiting for RPC response from GPU(?P<gpu>\d+) GSP"
    ),
    re.compile(r"NVRM: (?:GPU(?P<gpu>\d+) )?_kgspLogXid119: .*GSP (?:Timeout|Failure)"),
    re.compile(r"(?<![^\n])(?>[^\n]*?NVRM: ).*GSP RPC timeout", re.I),
    re.compile(r"(?<![^\n])(?>[^\n]*?NVRM: )(?>[^\n]*?GSP).*heartbeat", re.I),
    re.compile(r"(?<![^\n])(?>[^\n]*?NVRM: )(?>[^\n]*?heartbeat).*GSP", re.I),
]
_RMINIT = re.compile(
    r"NVRM: (?:GPU " + _PCI_IN + r": )?(?P<what>RmInitAdapter failed!|rm_init_adapter failed)"
    r"(?: \((?P<status>[0-9a-fA-Fx:]+)\))?(?:, device minor number (?P<minor>\d+))?"
)
# Tried once a line (only whether it matches is read): from the first word that holds
# NVRM/nvidia-nvlink and ends in ': ' (the word is checked from its start, so a word repeating
# the tag is read once), then from the first NVLink/knvlink after it; each later one on the line
# reaches less, so a failure there is a failure from every later one (it was quadratic).
_NVLINK = re.compile(
    r"(?<![^\n])(?>[^\n]*?(?<!\S)(?=\S*+(?<=:) )\S*?(?:NVRM|nvidia-nvlink))\S*+ "
    r"(?>.*?(?:\bNVLink\b|\bknvlink)).*\b(?:error|fail\w*|fatal|down|fault)",
    re.I,
)


def _fallen(msg: str) -> Match | None:
    for pat in _FALLEN:
        if m := pat.search(msg):
            groups = m.groupdict()
            payload: dict[str, Any] = {"text": msg}
            if groups.get("pciid"):
                payload["pci_device_id"] = groups["pciid"]
            pci = groups.get("pci")
            where = f"GPU {pci}" if pci else "A GPU"
            return Match(
                EventKind.GPU_LOST,
                f"{where} has fallen off the bus",
                None,
                Severity.CRITICAL,
                pci,
                payload,
            )
    return None


def _gsp(msg: str) -> Match | None:
    if m := _RMINIT.search(msg):
        payload: dict[str, Any] = {"text": msg, "rm_init_adapter_failed": True}
        if m["status"]:
            payload["status"] = m["status"]
        if m["minor"]:
            payload["device_minor"] = int(m["minor"])
        return Match(
            EventKind.GSP, msg.removeprefix("NVRM: "), None, Severity.ERROR, m["pci"], payload
        )
    for pat in _GSP:
        if m := pat.search(msg):
            payload = {"text": msg}
            groups = m.groupdict()
            if groups.get("gpu"):
                payload["gpu_ordinal"] = int(groups["gpu"])
            if groups.get("secs"):
                payload["timeout_s"] = int(groups["secs"])
            if fn := re.search(r"Expected function (\d+) \((\w+)\)", msg):
                payload["rpc_function"] = fn.group(2)
            pm = _PCI_ANY.search(msg)
            return Match(
                EventKind.GSP,
                msg.removeprefix("NVRM: "),
                None,
                Severity.ERROR,
                pm["pci"] if pm else None,
                payload,
            )
    return None


def _nvlink(msg: str) -> Match | None:
    if not _NVLINK.search(msg):
        return None
    payload: dict[str, Any] = {"text": msg}
    if link := re.search(r"\blink (\d+)", msg, re.I):
        payload["link"] = int(link.group(1))
    pm = _PCI_ANY.search(msg)
    sev = Severity.CRITICAL if re.search(r"\bfatal\b", msg, re.I) else Severity.ERROR
    return Match(EventKind.NVLINK, msg, None, sev, pm["pci"] if pm else None, payload)


_RESET = re.compile(r"(?<![^\n])(?>[^\n]*?NVRM: ).*\bNV_ERR_RESET_REQUIRED\b")


def _reset_required(msg: str) -> Match | None:
    # e.g. "nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED]":
    # the driver will not use the GPU again until it is reset.
    if not _RESET.search(msg):
        return None
    pm = _PCI_ANY.search(msg)
    return Match(
        EventKind.GPU_LOST,
        "the driver says the GPU needs a reset (NV_ERR_RESET_REQUIRED)",
        None,
        Severity.CRITICAL,
        pm["pci"] if pm else None,
        {"text": msg, "reset_required": True},
    )


RECOGNIZERS: list[Callable[[str], Match | None]] = [
    _xid,
    _sxid,
    _fallen,
    _gsp,
    _nvlink,
    _reset_required,
]
