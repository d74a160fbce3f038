"""dcgm-exporter /metrics text -> per-GPU values, with no state: shared by DcgmSource and `explain`.

Parsed with prometheus_client's text parser; when a scrape holds a bad line (garbage, an
elision `...`, a truncated last sample) the text is parsed line by line instead, each bad line
is reported through `on_bad_line`, and every good line is kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from timeline.models import Event, EventKind, GpuInfo, Sample, Severity
from timeline.pci import normalize_pci_bus_id

# DCGM's "blank" sentinels (dcgm_structs.h): int64 values from 0x7ffffffffffffff0 up and fp64
# values from 140737488355328.0 up mean "no data / not supported", never a measurement.
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANK = 140737488355328.0

SAMPLE_FIELDS: dict[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "util_gpu",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "util_mem",
    "DCGM_FI_DEV_FB_USED": "mem_used_mb",
    "DCGM_FI_DEV_FB_TOTAL": "mem_total_mb",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_GPU_TEMP": "temp_gpu",
    "DCGM_FI_DEV_MEMORY_TEMP": "temp_mem",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "clock_event_reasons",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clock_event_reasons",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ecc_sbe_volatile",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe_volatile",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "ecc_sbe_aggregate",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "ecc_dbe_aggregate",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "remapped_correctable",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "remapped_uncorrectable",
    "DCGM_FI_DEV_ROW_REMAP_PENDING": "remap_pending",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "remap_failure",
    "DCGM_FI_DEV_RETIRED_SBE": "retired_pages_sbe",
    "DCGM_FI_DEV_RETIRED_DBE": "retired_pages_dbe",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "pcie_replay",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "nvlink_crc_errors",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "nvlink_crc_errors",  # summed with FLIT
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "nvlink_replay_errors",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "nvlink_recovery_errors",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_mj",
}
_INT_FIELDS = {
    "clock_event_reasons",
    "ecc_sbe_volatile",
    "ecc_dbe_volatile",
    "ecc_sbe_aggregate",
    "ecc_dbe_aggregate",
    "remapped_correctable",
    "remapped_uncorrectable",
    "retired_pages_sbe",
    "retired_pages_dbe",
    "pcie_replay",
    "nvlink_crc_errors",
    "nvlink_replay_errors",
    "nvlink_recovery_errors",
}
_BOOL_FIELDS = {"remap_pending", "remap_failure"}
WORKLOAD_LABELS = (
    "pod",
    "namespace",
    "container",
    "pod_uid",
    "exported_pod",
    "exported_namespace",
    "exported_container",
    "pod_name",
    "pod_namespace",
    "container_name",
    "hpc_job",
)
XID_LAST = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"


@dataclass(frozen=True)
class DcgmRow:
    """One exposition sample: metric name, labels, value."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass
class GpuScrape:
    """Everything one scrape said about one physical GPU."""

    uuid: str
    index: int | None = None
    pci_bus_id: str | None = None
    model: str | None = None
    hostname: str | None = None
    device: str | None = None  # nvidia0, ...
    driver: str | None = None
    fields: dict[str, float] = field(default_factory=dict)  # Sample field -> value
    extra: dict[str, float] = field(default_factory=dict)  # other DCGM fields (PROF, clocks)
    workloads: list[dict[str, str]] = field(default_factory=list)  # pod/namespace/... label sets
    mig: bool = False
    xid_last: int | None = None
    xid_msg: str | None = None
    xid_counts: dict[int, float] = field(default_factory=dict)


def _is_blank(value: float) -> bool:
    return math.isnan(value) or value >= _FP64_BLANK or value >= _INT64_BLANK


def parse_exposition(
    text: str, *, on_bad_line: Callable[[str], None] | None = None
) -> list[DcgmRow]:
    """Prometheus text exposition -> rows; bad lines are reported and skipped, never raised."""
    try:
        return _rows(text)
    except Exception:  # prometheus_client raises ValueError and friends on any bad line
        pass
    rows: list[DcgmRow] = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            rows += _rows(s + "\n")
        except Exception:
            if on_bad_line is not None:
                on_bad_line(line)
    return rows


def _rows(text: str) -> list[DcgmRow]:
    return [
        DcgmRow(_name(fam.type, s.name), dict(s.labels), float(s.value))
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    ]


def _name(family_type: str, name: str) -> str:
    # prometheus_client names a counter's samples `<name>_total`; DCGM's names are upper case
    # and never end so, so the lower-case suffix is the parser's and comes off again.
    if family_type == "counter" and name.startswith("DCGM_") and name.endswith("_total"):
        return name.removesuffix("_total")
    return name


def group_by_gpu(rows: list[DcgmRow]) -> dict[str, GpuScrape]:
    """Rows -> one GpuScrape per GPU UUID (MIG instances fold into their parent GPU)."""
    gpus: dict[str, GpuScrape] = {}
    for row in rows:
        if not row.name.startswith("DCGM_") or _is_blank(row.value):
            continue
        lab = row.labels
        uuid = lab.get("UUID") or lab.get("uuid")
        if not uuid:
            continue
        g = gpus.get(uuid)
        if g is None:
            g = gpus[uuid] = _new_gpu(uuid, lab)
        _absorb(g, row)
    for g in gpus.values():
        if (
            "mem_total_mb" not in g.fields
            and "mem_used_mb" in g.fields
            and "dev_fb_free" in g.extra
        ):
            g.fields["mem_total_mb"] = (
                g.fields["mem_used_mb"]
                + g.extra["dev_fb_free"]
                + g.extra.get("dev_fb_reserved", 0.0)
            )
    return gpus


def _new_gpu(uuid: str, lab: dict[str, str]) -> GpuScrape:
    gpu = lab.get("gpu", "")
    return GpuScrape(
        uuid=uuid,
        index=int(gpu) if gpu.isdigit() else None,
        pci_bus_id=normalize_pci_bus_id(lab.get("pci_bus_id")),
        model=lab.get("modelName"),
        hostname=lab.get("Hostname"),
        device=lab.get("device"),
        driver=lab.get("DCGM_FI_DRIVER_VERSION"),
    )


def _absorb(g: GpuScrape, row: DcgmRow) -> None:
    lab = row.labels
    instance = lab.get("GPU_I_ID")
    if instance:
        g.mig = True
    work = {k: lab[k] for k in WORKLOAD_LABELS if lab.get(k)}
    if work and work not in g.workloads:
        g.workloads.append(work)
    if row.name == XID_LAST:
        g.xid_last = int(row.value)
        g.xid_msg = lab.get("err_msg") or g.xid_msg
        return
    if row.name == XID_COUNT:
        xid = lab.get("xid", "")
        if xid.isdigit() and int(xid) != 0:
            g.xid_counts[int(xid)] = g.xid_counts.get(int(xid), 0.0) + row.value
        return
    target = SAMPLE_FIELDS.get(row.name)
    if target is not None and instance is None:
        if target == "nvlink_crc_errors":
            g.fields[target] = g.fields.get(target, 0.0) + row.value
        else:
            g.fields[target] = row.value
        return
    key = row.name.removeprefix("DCGM_FI_").lower()
    if instance:
        key = f"{key}@gi{instance}"  # per MIG instance, e.g. prof_gr_engine_active@gi7
    g.extra[key] = row.value


def to_sample(g: GpuScrape, ts: float) -> Sample:
    """A GpuScrape as the timeline's wide Sample row."""
    values: dict[str, float | int | bool] = {}
    for name, value in g.fields.items():
        if name in _BOOL_FIELDS:
            values[name] = value != 0
        elif name in _INT_FIELDS:
            values[name] = int(value)
        else:
            values[name] = value
    return Sample.model_validate(
        {"ts": ts, "gpu_uuid": g.uuid, "extra": dict(g.extra) or None, **values}
    )


def to_gpu_info(g: GpuScrape, node: str) -> GpuInfo:
    """A GpuScrape's identity as GpuInfo."""
    return GpuInfo(
        uuid=g.uuid,
        node=node,
        index=g.index,
        pci_bus_id=g.pci_bus_id,
        name=g.model,
        memory_total_mb=g.fields.get("mem_total_mb"),
        mig_mode=g.mig or None,
        driver_version=g.driver,
    )


def dcgm_event(
    g: GpuScrape,
    *,
    node: str | None,
    ts: float,
    kind: EventKind,
    severity: Severity,
    message: str,
    payload: dict[str, Any],
    code: int | None = None,
) -> Event:
    """An Event about GPU `g` from source 'dcgm', carrying the exporter's labels."""
    labels = {"gpu": g.index, "device": g.device, "modelName": g.model, "Hostname": g.hostname}
    payload = {**payload, "labels": {k: v for k, v in labels.items() if v is not None}}
    if g.workloads:
        payload["workloads"] = g.workloads
    jobs = {j for j in map(workload_job_id, g.workloads) if j}
    return Event(
        ts=ts,
        node=node,
        source="dcgm",
        kind=kind,
        gpu_uuid=g.uuid,
        pci_bus_id=g.pci_bus_id,
        job_id=jobs.pop() if len(jobs) == 1 else None,
        code=code,
        severity=severity,
        message=message,
        payload=payload,
    )


def workload_job_id(work: dict[str, str]) -> str | None:
    """'namespace/pod' for a Kubernetes workload label set, the Slurm job for `hpc_job`."""
    pod = work.get("pod") or work.get("exported_pod") or work.get("pod_name")
    ns = work.get("namespace") or work.get("exported_namespace") or work.get("pod_namespace")
    if pod and ns:
        return f"{ns}/{pod}"
    return work.get("hpc_job") or None


def snapshot_events(g: GpuScrape, *, node: str | None, ts: float) -> list[Event]:
    """What one scrape alone states is wrong: a last Xid, a row-remap failure or pending, DBEs."""
    out: list[Event] = []
    if g.xid_last:
        msg = f"DCGM reports last Xid {g.xid_last}" + (f": {g.xid_msg}" if g.xid_msg else "")
        payload = {"xid": g.xid_last, "err_msg": g.xid_msg, "field": XID_LAST}
        out.append(
            dcgm_event(
                g,
                node=node,
                ts=ts,
                kind=EventKind.XID,
                severity=Severity.ERROR,
                message=msg,
                payload=payload,
                code=g.xid_last,
            )
        )
    if g.fields.get("remap_failure"):
        out.append(
            dcgm_event(
                g,
                node=node,
                ts=ts,
                kind=EventKind.ROW_REMAP,
                severity=Severity.CRITICAL,
                message="DCGM reports row remapping failed",
                payload={"remap_failure": True},
            )
        )
    if g.fields.get("remap_pending"):
        out.append(
            dcgm_event(
                g,
                node=node,
                ts=ts,
                kind=EventKind.ROW_REMAP,
                severity=Severity.WARNING,
                message="DCGM reports a row remap pending (reset needed)",
                payload={"remap_pending": True},
            )
        )
    dbe = g.fields.get("ecc_dbe_volatile")
    if dbe:
        out.append(
            dcgm_event(
                g,
                node=node,
                ts=ts,
                kind=EventKind.ECC,
                severity=Severity.ERROR,
                message=f"DCGM reports {int(dbe)} volatile double-bit ECC errors",
                payload={"ecc": "dbe", "scope": "volatile", "value": int(dbe)},
            )
        )
    return out


def parse_dcgm_text(
    text: str,
    *,
    node: str | None = None,
    ts: float = 0.0,
    on_bad_line: Callable[[str], None] | None = None,
) -> tuple[list[GpuScrape], list[Event]]:
    """A saved scrape -> per-GPU values and what the scrape alone states is wrong (for explain)."""
    gpus = list(group_by_gpu(parse_exposition(text, on_bad_line=on_bad_line)).values())
    events = [e for g in gpus for e in snapshot_events(g, node=node, ts=ts)]
    return gpus, events
