"""dcgm-exporter /metrics text, scraped or pasted, read for what one scrape shows is wrong.

The collector's parser (collector.parse.dcgm) groups samples per GPU and states the faults of
one scrape (the last Xid, a failed or pending row remap, volatile DBEs). A pasted scrape often
lacks what the agent always has, so this reader adds, from NVIDIA/dcgm-exporter @d5e5f510a1b6:
- a GPU key for samples whose labels were trimmed of UUID (the parser keys GPUs by UUID): the
  Hostname with gpu, device or pci_bus_id (internal/pkg/collector/gpu_collector.go's labels);
- the Xids of DCGM_EXP_XID_ERRORS_COUNT ("reported XIDs during last window", one sample per
  "xid" label: internal/pkg/collector/xid_collector.go), each read by the Xid catalog;
- DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS above 0 ("Number of remapped rows for uncorrectable
  errors", etc/default-counters.csv): DCGM's own health watch reads the same count as
  DCGM_FR_UNCORRECTABLE_ROW_REMAP ("GPU %u had uncorrectable memory errors and %u rows were
  remapped", NVIDIA/DCGM dcgmlib/dcgm_errors.h).
"""

from __future__ import annotations

import re

from collector.parse.dcgm import (
    XID_COUNT,
    GpuScrape,
    dcgm_event,
    parse_dcgm_text,
)
from correlator.explain.readers_gpu import ReadResult
from timeline.models import Event, EventKind, Severity

_METRIC = re.compile(r"^(?P<name>DCGM_[A-Z0-9_]+)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
# a label's name from the start of its word (linear on a long run of word characters)
_LABEL = re.compile(r'(?<!\w)(\w+)\s*=\s*"([^"]*)"')
_HAS_UUID = re.compile(r'(?:^|[{,\s])(?:UUID|uuid)\s*=\s*"[^"]+"')
_SYNTHETIC = "explain-gpu:"  # the key given to a GPU whose samples carry no UUID
_REMAPPED_UNCORRECTABLE = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
# Which exposition line is the evidence for each kind of event this reader makes.
_EVIDENCE_METRIC = {
    EventKind.XID: ("DCGM_FI_DEV_XID_ERRORS", XID_COUNT),
    EventKind.ROW_REMAP: (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        _REMAPPED_UNCORRECTABLE,
    ),
    EventKind.ECC: ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
}


def _keyed(line: str) -> str:
    """`line` with a UUID label added when its labels have none (the GPU's key for the parser)."""
    m = _METRIC.match(line)
    if m is None or _HAS_UUID.search(m.group("labels") or ""):
        return line
    labels = dict(_LABEL.findall(m.group("labels") or ""))
    gpu = labels.get("gpu") or labels.get("device") or labels.get("pci_bus_id") or "?"
    key = f'UUID="{_SYNTHETIC}{labels.get("Hostname", "?")}/{gpu}"'
    at = m.end("name")
    if m.group("labels") is None:
        return f"{line[:at]}{{{key}}}{line[at:]}"
    sep = "," if m.group("labels").strip() else ""
    return f"{line[: at + 1]}{key}{sep}{line[at + 1 :]}"


def read_dcgm_metrics(lines: list[str]) -> ReadResult:
    """dcgm-exporter /metrics text, through the collector's parser; evidence is the metric line."""
    out = ReadResult()
    metric = [(i, ln.strip()) for i, ln in enumerate(lines) if _METRIC.match(ln.strip())]
    if not metric:
        return out
    out.claimed = {i for i, _ in metric}
    out.claimed |= {
        i for i, ln in enumerate(lines) if ln.startswith(("# HELP DCGM", "# TYPE DCGM"))
    }
    keyed = [(_keyed(ln), ln) for _, ln in metric]  # (as parsed, as written)
    gpus, events = parse_dcgm_text("\n".join(k for k, _ in keyed) + "\n")
    by_uuid = {g.uuid: g for g in gpus}
    events += [e for g in gpus for e in _window_events(g)]
    for ev in events:
        g = by_uuid.get(ev.gpu_uuid or "")
        names = _EVIDENCE_METRIC.get(ev.kind, ())
        ev.raw = next(
            (
                written
                for parsed, written in keyed
                if parsed.startswith(names) and (ev.gpu_uuid or "") in parsed
            ),
            ev.message,
        )
        if g is not None:
            ev.node = ev.node or g.hostname
            if g.index is not None:
                ev.payload["gpu_index"] = g.index
        if (ev.gpu_uuid or "").startswith(_SYNTHETIC):
            ev.gpu_uuid = None  # the key was ours, not the GPU's
        out.events.append(ev)
    return out


def _window_events(g: GpuScrape) -> list[Event]:
    """What the scrape shows beyond the parser's snapshot: the window's Xids (those other than
    the last Xid, which the parser reports) and rows remapped after uncorrectable errors."""
    out: list[Event] = []
    for xid, count in sorted(g.xid_counts.items()):
        if count > 0 and xid != g.xid_last:
            out.append(
                dcgm_event(
                    g,
                    node=None,
                    ts=0.0,
                    kind=EventKind.XID,
                    severity=Severity.ERROR,
                    message=f"DCGM reports Xid {xid} {int(count)} time(s) in its window",
                    payload={"xid": xid, "count": count, "field": XID_COUNT},
                    code=xid,
                )
            )
    rows = g.fields.get("remapped_uncorrectable", 0.0)
    if rows > 0 and not g.fields.get("remap_failure") and not g.fields.get("remap_pending"):
        out.append(
            dcgm_event(
                g,
                node=None,
                ts=0.0,
                kind=EventKind.ROW_REMAP,
                severity=Severity.ERROR,
                message=f"DCGM reports {int(rows)} rows remapped after uncorrectable errors",
                payload={"uncorrectable_remapped": int(rows)},
            )
        )
    return out
