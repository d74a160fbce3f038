"""Values recorded on a real H100 that collector.fakenvml replays, and its small helpers."""

from __future__ import annotations

import ctypes
import json
import queue
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

RECORDED_DIR = Path(__file__).parent / "recorded"
TRACES = {
    "idle_busy_idle": RECORDED_DIR / "trace_idle_busy_idle.jsonl",
    "spin_vs_compute": RECORDED_DIR / "trace_spin_vs_compute.jsonl",
}

# Identity and counters of the recorded H100 (tests/fixtures/nvml/nvidia-smi-q.xml, report.json).
H100: dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-2a11160c-cbb9-41b1-5c0b-bd5856450051",
    "serial": "1752724020927",
    "pci_bus_id": "00000000:00:06.0",
    "driver": "580.159.04",
    "nvml_version": "13.580.159.04",
    "cuda_driver": 13000,
    "mem_total": 85520809984,  # report.json percall.mem (bytes)
    "mem_used_idle": 503316480,
    "temp_mem": 39,  # NVML_FI_DEV_MEMORY_TEMP in report.json fieldvalues_batch
    "energy_mj": 2211157,  # report.json percall.energy_mj
    "mem_clock": 2619,
    "sm_clock_max": 1980,
    "ecc_mode": [1, 1],
    "remapped_rows": (0, 0, 0, 0),
    "pcie_replay": 0,
    "mig_mode": [0, 0],
    "events_supported": 65439,  # report.json events_supported_mask
}
# The Xid run (fault_report.json, dmesg_after_faults.txt) was another H100 on the same bus id.
H100_FAULT_RUN: dict[str, Any] = {
    **H100,
    "uuid": "GPU-25179923-e6d8-2c49-9579-04b41661425f",
    "serial": "1652624035030",
}
# Getters that raised NVMLError_NotSupported on the recorded H100 (report.json).
H100_NOT_SUPPORTED = frozenset(
    {
        "nvmlDeviceGetRetiredPages",
        "nvmlDeviceGetRetiredPages_v2",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetNvLinkState",
        "nvmlDeviceGetNvLinkErrorCounter",
        "nvmlDeviceGetFanSpeed",
    }
)
# Field ids whose per-field nvmlReturn was NOT_SUPPORTED there: retired pending, NVLink totals.
H100_FIELDS_NOT_SUPPORTED = frozenset({31, 38, 45, 52, 59})
NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId/computeInstanceId of a non-MIG event, as recorded

EXPORTED_PREFIXES = (
    "NVML_",
    "NVMLError",
    "nvmlEventType",
    "nvmlClocksEventReason",
    "nvmlClocksThrottleReason",
    "c_nvml",
    "nvmlPciInfo",
    "nvmlFriendlyObject",
    "nvmlStructToFriendlyObject",
)


def load_trace(path: str | Path) -> list[dict[str, Any]]:
    """The records of a recorded JSONL trace (t, util, mem_util, mem_used, power_mw, ...)."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def recorded_xid_events() -> list[dict[str, Any]]:
    """The real NVML Xid events of the fault run: [{t, type, data, gi, ci}, ...]."""
    report = json.loads((RECORDED_DIR / "fault_report.json").read_text(encoding="utf-8"))
    return list(report["nvml_xid_events"])


@dataclass
class FakeGpu:
    """One simulated GPU: a recorded identity (cloned for index > 0) and its fault switches."""

    index: int
    uuid: str
    serial: str
    pci_bus_id: str
    identity: dict[str, Any]
    lost_code: int | None = None
    not_supported: set[str] = field(default_factory=set)
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    ecc: dict[tuple[int, int], int] = field(default_factory=dict)  # (error, counter) -> n
    remapped_rows: tuple[int, int, int, int] | None = None  # None: as recorded
    mig_instances: int = 0  # >0: MIG enabled with this many MIG devices
    struct: Any = None
    handle: Any = None
    mig_handles: list[Any] = field(default_factory=list)


def clone_identity(identity: dict[str, Any], index: int) -> tuple[str, str, str]:
    """(uuid, serial, bus id) of GPU `index`: the recorded one for 0, distinct clones after."""
    if index == 0:
        return identity["uuid"], identity["serial"], identity["pci_bus_id"]
    uuid = identity["uuid"][:-4] + f"{(int(identity['uuid'][-4:], 16) + index) % 0x10000:04x}"
    serial = str(int(identity["serial"]) + index)
    domain, bus, devfn = identity["pci_bus_id"].split(":")
    dev, fn = devfn.split(".")
    return uuid, serial, f"{domain}:{bus}:{int(dev, 16) + index:02X}.{fn}"


class EventSet:
    """A fake NVML event set: what each device registered and a queue of event data."""

    def __init__(self, struct: Any) -> None:
        self.struct = struct
        self.handle = ctypes.pointer(struct)
        self.registered: dict[int, int] = {}
        self.events: queue.Queue[Any] = queue.Queue()

    def put(self, device: Any, event_type: int, data: int, gi: int, ci: int) -> None:
        """Queue one c_nvmlEventData_t."""
        ev = pynvml.c_nvmlEventData_t()
        ev.device = device
        ev.eventType, ev.eventData = event_type, data
        ev.gpuInstanceId, ev.computeInstanceId = gi, ci
        self.events.put(ev)
