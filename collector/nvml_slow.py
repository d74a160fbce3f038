"""NVML slow fields (every N intervals): ECC, row remap, retired pages, PCIe, NVLink, energy.

These getters cost ~130-150 us (PCIe replay, MIG mode) up to ~2.9 ms (total energy) on an H100,
so they are read on the slow cadence only. When a counter moves up between two slow reads the
source says so with an `ecc` / `row_remap` / `nvlink` event carrying the old
and new values; what that means is the correlator's business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from timeline.models import Event, EventKind, Sample, Severity

if TYPE_CHECKING:
    from collector.base import Observations
    from collector.nvml import NvmlGpu, NvmlSource

MISSING: Any = object()  # an NVML getter was unsupported or failed

_NVLINK_FIELDS = {
    45: "nvlink_crc_errors",  # NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL
    52: "nvlink_replay_errors",  # NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
    59: "nvlink_recovery_errors",  # NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
}
_ECC_FIELDS = ("ecc_sbe_volatile", "ecc_dbe_volatile", "ecc_sbe_aggregate", "ecc_dbe_aggregate")
_WATCHED = {
    **{f: EventKind.ECC for f in _ECC_FIELDS},
    "remapped_uncorrectable": EventKind.ROW_REMAP,
    "remap_pending": EventKind.ROW_REMAP,
    "remap_failure": EventKind.ROW_REMAP,
    **{f: EventKind.NVLINK for f in _NVLINK_FIELDS.values()},
}


def read_slow(src: NvmlSource, gpu: NvmlGpu, s: Sample, obs: Observations, now: float) -> None:
    """Fill the slow fields of sample `s`; emit events for counters that moved; refresh MIG."""
    nv, call = src.nvml, src.call
    corrected, uncorrected = (
        nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
        nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
    )
    for name, err, counter in (
        ("ecc_sbe_volatile", corrected, nv.NVML_VOLATILE_ECC),
        ("ecc_dbe_volatile", uncorrected, nv.NVML_VOLATILE_ECC),
        ("ecc_sbe_aggregate", corrected, nv.NVML_AGGREGATE_ECC),
        ("ecc_dbe_aggregate", uncorrected, nv.NVML_AGGREGATE_ECC),
    ):
        value = call(gpu, "nvmlDeviceGetTotalEccErrors", err, counter)
        if value is not MISSING:
            setattr(s, name, int(value))
    rows = call(gpu, "nvmlDeviceGetRemappedRows")
    if rows is not MISSING:
        s.remapped_correctable, s.remapped_uncorrectable = int(rows[0]), int(rows[1])
        s.remap_pending, s.remap_failure = bool(rows[2]), bool(rows[3])
    for name, cause in (
        ("retired_pages_sbe", nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
        ("retired_pages_dbe", nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
    ):
        pages = call(gpu, "nvmlDeviceGetRetiredPages", cause)
        if pages is not MISSING:
            setattr(s, name, len(pages))
    replay = call(gpu, "nvmlDeviceGetPcieReplayCounter")
    if replay is not MISSING:
        s.pcie_replay = int(replay)
    for fid, value in src.field_values(gpu, list(_NVLINK_FIELDS)).items():
        setattr(s, _NVLINK_FIELDS[fid], int(value))
    energy = call(gpu, "nvmlDeviceGetTotalEnergyConsumption")
    if energy is not MISSING:
        s.energy_mj = float(energy)
    _refresh_mig(src, gpu, obs)
    _counter_events(src, gpu, s, obs, now)


def _refresh_mig(src: NvmlSource, gpu: NvmlGpu, obs: Observations) -> None:
    """Report MIG mode changes; collect MIG device handles (for processes) without failing."""
    nv = src.nvml
    mode = src.call(gpu, "nvmlDeviceGetMigMode")
    if mode is MISSING:
        return
    enabled = bool(mode[0] == nv.NVML_DEVICE_MIG_ENABLE)
    if enabled != gpu.info.mig_mode:
        gpu.info = gpu.info.model_copy(update={"mig_mode": enabled})
        obs.gpus.append(gpu.info)
    gpu.mig_handles = []
    if not enabled:
        return
    count = src.call(gpu, "nvmlDeviceGetMaxMigDeviceCount")
    for i in range(0 if count is MISSING else int(count)):
        try:
            gpu.mig_handles.append(nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu.handle, i))
        except Exception:
            continue  # NOT_FOUND for slots without a MIG device is normal


def _counter_events(
    src: NvmlSource, gpu: NvmlGpu, s: Sample, obs: Observations, now: float
) -> None:
    moved: dict[str, list[Any]] = {}
    for name in _WATCHED:
        new = getattr(s, name)
        old = gpu.last_slow.get(name)
        if new is not None and old is not None and new > old:
            moved[name] = [old, new]
        if new is not None:
            gpu.last_slow[name] = new
    for kind in (EventKind.ECC, EventKind.ROW_REMAP, EventKind.NVLINK):
        fields = {k: v for k, v in moved.items() if _WATCHED[k] == kind}
        if not fields:
            continue
        text = ", ".join(f"{k} {v[0]}->{v[1]}" for k, v in fields.items())
        obs.events.append(
            Event(
                ts=now,
                node=src.node,
                source="nvml",
                kind=kind,
                gpu_uuid=gpu.info.uuid,
                pci_bus_id=gpu.info.pci_bus_id,
                severity=Severity.WARNING,
                message=f"NVML counters moved on GPU {gpu.info.pci_bus_id}: {text}",
                payload={"moved": fields},
            )
        )
