"""Readers for per-GPU field tables: `nvidia-smi --query-gpu=... --format=csv` and `dcgmi dmon`.

Both print one row per GPU whose columns only the header (or the command line) names, so a row
alone ("1, Reset", "GPU 1   120") means nothing to a free-text pattern. The readers map each
row to its columns and turn the two fields that state a fault into the events the rules read:

- nvidia-smi's `gpu_recovery_action` (nvmlDeviceGetGpuRecoveryAction; the -q document prints
  it as "GPU Recovery Action"): None, or what must be done before the GPU is usable again
  (Reset, Reboot, Drain P2P, Drain and Reset: docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/
  error-recovery-and-response-flags.html). A row that asks for an action becomes
  "GPU <i> GPU Recovery Action : <value>", which nvidia_smi.json's smi_gpu_reset_required reads.
- dcgmi dmon's XIDER column, field 230 DCGM_FI_DEV_XID_ERRORS, "the specific XID error" last
  seen (NVIDIA/DCGM dcgmlib/dcgm_fields.h, short name "XIDER" in dcgmlib/src/dcgm_fields.cpp;
  dcgmi/DeviceMonitor.cpp prints "#Entity <short names>", "ID <units>", then
  "<entity group> <id> <values>"). A non-zero value becomes an Xid event of that code, which the
  Xid catalog classifies like a kernel Xid line.
"""

from __future__ import annotations

import re

from correlator.explain.readers_gpu import ReadResult, _event
from timeline.models import EventKind

# the command line names the queried fields when --format=csv,noheader drops the header row
_QUERY_CMD = re.compile(r"--query-gpu[= ](?P<fields>[\w.,]+)")
_RECOVERY = "gpu_recovery_action"
# "None" is no action; "N/A" / "[N/A]" / "[Not Supported]" say nothing; anything else asks for one
_NO_ACTION = re.compile(r"^(?:None|\[?N/A\]?|\[Not Supported\]|\[Unknown Error\])?$", re.I)


def _csv_fields(line: str) -> list[str] | None:
    cmd = _QUERY_CMD.search(line)
    if cmd:
        return [f.strip().lower() for f in cmd.group("fields").split(",") if f.strip()]
    cells = [c.strip().lower() for c in line.split(",")]
    if _RECOVERY in cells:  # a csv header row: "index, gpu_recovery_action"
        return cells
    return None


def read_smi_query_csv(lines: list[str]) -> ReadResult:
    """Rows of `nvidia-smi --query-gpu=...gpu_recovery_action... --format=csv` asking for an
    action: one event per GPU, on the row it was read from."""
    out = ReadResult()
    fields: list[str] | None = None
    for i, line in enumerate(lines):
        found = _csv_fields(line)
        if found is not None:
            fields = found if _RECOVERY in found else None
            continue
        if fields is None:
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(fields):
            if line.strip():
                fields = None  # the table ended
            continue
        row = dict(zip(fields, cells, strict=False))
        # values never hold two spaces in a row: text after them is a note pasted beside the row
        action = row[_RECOVERY].split("  ")[0].strip()
        out.claimed.add(i)
        if _NO_ACTION.match(action):
            continue
        gpu = row.get("index") or row.get("pci.bus_id") or "?"
        msg = f"nvidia-smi: GPU {gpu} GPU Recovery Action : {action}"
        payload: dict[str, object] = {"gpu_recovery_action": action}
        if gpu.isdigit():
            payload["gpu_index"] = int(gpu)
        out.events.append(_event(EventKind.OTHER, line, msg, payload=payload))
    return out


_DMON_HEADER = re.compile(r"^\s*#Entity\s+(?P<names>.+?)\s*$")
_DMON_ROW = re.compile(r"^\s*(?P<group>GPU|GPU-I|GPU-CI)\s+(?P<id>\d+)\s+(?P<values>.+?)\s*$")
_XIDER = "XIDER"


def read_dcgmi_dmon(lines: list[str]) -> ReadResult:
    """`dcgmi dmon` rows with a non-zero XIDER (last Xid) value: one Xid event per GPU."""
    out = ReadResult()
    column: int | None = None
    for i, line in enumerate(lines):
        if m := _DMON_HEADER.match(line):
            names = m.group("names").split()
            column = names.index(_XIDER) if _XIDER in names else None
            continue
        row = _DMON_ROW.match(line) if column is not None else None
        if row is None or column is None:
            continue
        values = row.group("values").split()
        if column >= len(values):
            continue
        out.claimed.add(i)
        xid = values[column]
        if not xid.isdigit() or int(xid) == 0:
            continue
        msg = f"dcgmi dmon: {row.group('group')} {row.group('id')} last Xid {xid}"
        payload: dict[str, object] = {"xid": int(xid), "field": "DCGM_FI_DEV_XID_ERRORS"}
        if row.group("group") == "GPU":
            payload["gpu_index"] = int(row.group("id"))
        out.events.append(_event(EventKind.XID, line, msg, code=int(xid), payload=payload))
    return out
