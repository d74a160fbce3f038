"""A faithful fake of the `pynvml` module (nvidia-ml-py), fed from values recorded on a real H100.

Same function names and signatures as nvidia-ml-py; the constants, the NVMLError classes and the
ctypes structures (c_nvmlEventData_t, c_nvmlUtilization_t, nvmlPciInfo_t, c_nvmlFieldValue_t, ...)
are nvidia-ml-py's own, so code written against the fake runs unchanged on a GPU node. Device
handles are real `c_nvmlDevice_t` pointers. Telemetry follows the recorded 10 Hz traces;
identity, ECC, row-remap, PCIe, MIG and supported-event values come from `nvidia-smi -q` and the
NVML report of the same H100 (collector/recorded/). Only for tests, demos and `--fake-nvml`.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pynvml

from collector.fakenvml_data import (
    EXPORTED_PREFIXES,
    H100,
    H100_FAULT_RUN,
    H100_FIELDS_NOT_SUPPORTED,
    H100_NOT_SUPPORTED,
    NO_INSTANCE,
    RECORDED_DIR,
    TRACES,
    EventSet,
    FakeGpu,
    clone_identity,
    load_trace,
    recorded_xid_events,
)
from collector.fakenvml_events import FakeEventsMixin
from collector.fakenvml_health import FakeHealthMixin

__all__ = [
    "H100",
    "H100_FAULT_RUN",
    "RECORDED_DIR",
    "TRACES",
    "FakeGpu",
    "FakeNvml",
    "load_trace",
    "recorded_xid_events",
]


class FakeNvml(FakeEventsMixin, FakeHealthMixin):
    """Stands in for the `pynvml` module: pass an instance wherever the module is expected."""

    def __init__(
        self,
        *,
        gpus: int = 1,
        trace: str | Path | list[dict[str, Any]] = "idle_busy_idle",
        identity: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        speed: float = 1.0,
    ) -> None:
        for name in dir(pynvml):
            if name.startswith(EXPORTED_PREFIXES):
                setattr(self, name, getattr(pynvml, name))
        self.identity = dict(identity or H100)
        records = trace if isinstance(trace, list) else load_trace(TRACES.get(str(trace), trace))
        t0 = records[0]["t"]
        self._trace_t = [r["t"] - t0 for r in records]
        self._trace = records
        self._period = self._trace_t[-1] + (self._trace_t[-1] / max(len(records) - 1, 1))
        self._clock = clock
        self._start = clock()
        self._speed = speed
        self.initialized = 0
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._gpus: list[FakeGpu] = []
        for i in range(gpus):
            uuid, serial, bus = clone_identity(self.identity, i)
            gpu = FakeGpu(
                i, uuid, serial, bus, self.identity, not_supported=set(H100_NOT_SUPPORTED)
            )
            gpu.struct = pynvml.struct_c_nvmlDevice_t()
            gpu.handle = ctypes.pointer(gpu.struct)
            self._gpus.append(gpu)
        self._by_addr = {ctypes.addressof(g.struct): g for g in self._gpus}
        self._mig_by_addr: dict[int, tuple[FakeGpu, int]] = {}
        self._event_sets: dict[int, EventSet] = {}

    # --- test and demo controls -----------------------------------------------------------

    def gpu(self, index: int) -> FakeGpu:
        """The simulated GPU at an index."""
        return self._gpus[index]

    def lose_gpu(self, index: int, code: int = pynvml.NVML_ERROR_GPU_IS_LOST) -> None:
        """From now on every call on this GPU raises NVMLError(code) (GPU_IS_LOST or UNKNOWN)."""
        self._gpus[index].lost_code = code

    def recover_gpu(self, index: int) -> None:
        """Undo lose_gpu."""
        self._gpus[index].lost_code = None

    def set_not_supported(self, function: str, index: int | None = None) -> None:
        """Make a getter raise NVMLError_NotSupported on one GPU (or all)."""
        for gpu in self._gpus if index is None else [self._gpus[index]]:
            gpu.not_supported.add(function)

    def set_processes(self, index: int, procs: Iterable[tuple[int, int | None]]) -> None:
        """Compute processes on a GPU as (pid, used GPU memory bytes)."""
        self._gpus[index].processes = list(procs)

    def set_ecc(self, index: int, error_type: int, counter_type: int, value: int) -> None:
        """Set an ECC total (e.g. NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC)."""
        self._gpus[index].ecc[(error_type, counter_type)] = value

    def set_remapped_rows(self, index: int, rows: tuple[int, int, int, int]) -> None:
        """Set (correctable, uncorrectable, pending, failure) as nvmlDeviceGetRemappedRows says."""
        self._gpus[index].remapped_rows = rows

    def enable_mig(self, index: int, instances: int = 2) -> None:
        """Put a GPU in MIG mode with some MIG devices.

        As on hardware, nvmlDeviceGetUtilizationRates on the parent then raises NotSupported
        (NVML API docs; a real A100 trace in github.com/XuehaiPan/nvitop/issues/5) and MIG
        device UUIDs look like `MIG-8c4c5a27-e508-5556-b2ea-7e549465741e`
        (github.com/hashicorp/nomad-device-nvidia/pull/53).
        """
        gpu = self._gpus[index]
        gpu.mig_instances = instances
        gpu.mig_handles = []
        for i in range(instances):
            struct = pynvml.struct_c_nvmlDevice_t()
            gpu.mig_handles.append((struct, ctypes.pointer(struct)))
            self._mig_by_addr[ctypes.addressof(struct)] = (gpu, i)

    # --- internals ----------------------------------------------------------------------

    def _enter(self, fn: str, handle: Any = None) -> FakeGpu | None:
        with self._lock:
            self.calls[fn] = self.calls.get(fn, 0) + 1
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if handle is None:
            return None
        addr = ctypes.addressof(handle.contents)
        if addr in self._mig_by_addr:
            parent, _ = self._mig_by_addr[addr]
            if parent.lost_code is not None:
                raise pynvml.NVMLError(parent.lost_code)
            return None  # a MIG device handle: callers decide what it supports
        gpu = self._by_addr.get(addr)
        if gpu is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if gpu.lost_code is not None:
            raise pynvml.NVMLError(gpu.lost_code)
        if fn in gpu.not_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def _device(self, fn: str, handle: Any) -> FakeGpu:
        gpu = self._enter(fn, handle)
        if gpu is None:  # MIG device handles support none of the full-GPU getters here
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def _point(self, gpu: FakeGpu) -> dict[str, Any]:
        # Each GPU plays the trace with its own phase so a fleet does not move in lockstep.
        elapsed = (self._clock() - self._start) * self._speed + gpu.index * 1.7
        pos = elapsed % self._period
        i = max(bisect.bisect_right(self._trace_t, pos) - 1, 0)
        return self._trace[i]

    # --- system -------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        """nvmlInit()."""
        self.nvmlInitWithFlags(0)

    def nvmlInitWithFlags(self, flags: int) -> None:
        """nvmlInitWithFlags(flags); reference counted like the real library."""
        self.initialized += 1
        self.calls["nvmlInit"] = self.calls.get("nvmlInit", 0) + 1

    def nvmlShutdown(self) -> None:
        """nvmlShutdown()."""
        self._enter("nvmlShutdown")
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        """Driver version string."""
        self._enter("nvmlSystemGetDriverVersion")
        return str(self.identity["driver"])

    def nvmlSystemGetNVMLVersion(self) -> str:
        """NVML version string."""
        self._enter("nvmlSystemGetNVMLVersion")
        return str(self.identity["nvml_version"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        """CUDA driver version as an int (13000 = 13.0)."""
        self._enter("nvmlSystemGetCudaDriverVersion")
        return int(self.identity["cuda_driver"])

    def nvmlDeviceGetCount(self) -> int:
        """Number of GPUs."""
        self._enter("nvmlDeviceGetCount")
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        """A c_nvmlDevice_t for a GPU index."""
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self._gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self._gpus[index]
        if gpu.lost_code is not None:
            raise pynvml.NVMLError(gpu.lost_code)
        return gpu.handle

    # --- identity -----------------------------------------------------------------------

    def nvmlDeviceGetName(self, handle: Any) -> str:
        """Product name."""
        self._enter("nvmlDeviceGetName", handle)
        return str(self.identity["name"])

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """GPU-... (or MIG-... for a MIG device handle)."""
        gpu = self._enter("nvmlDeviceGetUUID", handle)
        if gpu is None:
            parent, i = self._mig_by_addr[ctypes.addressof(handle.contents)]
            return "MIG-" + parent.uuid[4:-2] + f"{i:02x}"
        return gpu.uuid

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        """Board serial number."""
        return self._device("nvmlDeviceGetSerial", handle).serial

    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        """NVML index."""
        return self._device("nvmlDeviceGetIndex", handle).index

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        """/dev/nvidiaN minor number."""
        return self._device("nvmlDeviceGetMinorNumber", handle).index

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        """An nvmlPciInfo_t with the recorded bus id."""
        gpu = self._device("nvmlDeviceGetPciInfo", handle)
        info = pynvml.nvmlPciInfo_t()
        info.busId = gpu.pci_bus_id.encode()
        info.busIdLegacy = gpu.pci_bus_id[4:].encode()
        domain, bus, devfn = gpu.pci_bus_id.split(":")
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(devfn[:2], 16)
        info.pciDeviceId, info.pciSubSystemId = 0x233010DE, 0x16C110DE  # nvidia-smi -q PCI
        return info

    # --- hot fields ---------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        """c_nvmlUtilization_t from the trace; NotSupported in MIG mode as on real hardware."""
        gpu = self._device("nvmlDeviceGetUtilizationRates", handle)
        if gpu.mig_instances:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        p = self._point(gpu)
        util = pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = int(p["util"]), int(p["mem_util"])
        return util

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        """c_nvmlMemory_t: recorded total, used from the trace."""
        gpu = self._device("nvmlDeviceGetMemoryInfo", handle)
        used = int(self._point(gpu).get("mem_used", self.identity["mem_used_idle"]))
        mem = pynvml.c_nvmlMemory_t()
        mem.total, mem.used = int(self.identity["mem_total"]), used
        mem.free = mem.total - used
        return mem

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        """GPU temperature (C) from the trace."""
        gpu = self._device("nvmlDeviceGetTemperature", handle)
        return int(self._point(gpu)["temp"])

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        """Power in mW from the trace."""
        gpu = self._device("nvmlDeviceGetPowerUsage", handle)
        return int(self._point(gpu)["power_mw"])

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        """SM/graphics clock from the trace; memory clock as recorded."""
        gpu = self._device("nvmlDeviceGetClockInfo", handle)
        if clock_type == pynvml.NVML_CLOCK_MEM:
            return int(self.identity["mem_clock"])
        return int(self._point(gpu)["sm_clock"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        """GpuIdle (1, as recorded at idle) when the trace is idle below max clock, else 0."""
        gpu = self._device("nvmlDeviceGetCurrentClocksEventReasons", handle)
        p = self._point(gpu)
        idle = int(p["util"]) == 0 and int(p["sm_clock"]) < int(self.identity["sm_clock_max"])
        return int(pynvml.nvmlClocksEventReasonGpuIdle) if idle else 0

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        """Deprecated alias of nvmlDeviceGetCurrentClocksEventReasons."""
        return self.nvmlDeviceGetCurrentClocksEventReasons(handle)

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list[Any] | tuple[Any, ...]) -> Any:
        """An array of c_nvmlFieldValue_t; per-field nvmlReturn as recorded on the H100."""
        gpu = self._device("nvmlDeviceGetFieldValues", handle)
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        known = {
            pynvml.NVML_FI_DEV_MEMORY_TEMP: self.identity["temp_mem"],
            pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: self._energy(gpu),
            pynvml.NVML_FI_DEV_POWER_INSTANT: self._point(gpu)["power_mw"],
            pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: self.identity["pcie_replay"],
            pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: 0,
            pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: 0,
            pynvml.NVML_FI_DEV_REMAPPED_UNC: 0,
            pynvml.NVML_FI_DEV_REMAPPED_PENDING: 0,
            pynvml.NVML_FI_DEV_REMAPPED_FAILURE: 0,
        }
        for i, fid in enumerate(field_ids):
            fid = fid[0] if isinstance(fid, tuple) else fid
            values[i].fieldId = fid
            values[i].timestamp = int(time.time() * 1e6)
            if fid in H100_FIELDS_NOT_SUPPORTED or fid not in known:
                values[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            values[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            values[i].value.ullVal = int(known[fid])
        return values

    # --- slow fields --------------------------------------------------------------------

    def _energy(self, gpu: FakeGpu) -> int:
        watts = float(self._point(gpu)["power_mw"]) / 1000.0
        return int(self.identity["energy_mj"] + (self._clock() - self._start) * watts * 1000.0)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        """mJ since driver load: the recorded value plus power integrated since the fake began."""
        return self._energy(self._device("nvmlDeviceGetTotalEnergyConsumption", handle))

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        """[current, pending]."""
        gpu = self._device("nvmlDeviceGetMigMode", handle)
        return [1, 1] if gpu.mig_instances else list(self.identity["mig_mode"])

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        """7 on an H100."""
        self._device("nvmlDeviceGetMaxMigDeviceCount", handle)
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any:
        """A MIG device handle, or NVMLError_NotFound where no instance exists."""
        gpu = self._device("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        if not gpu.mig_instances:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if index >= gpu.mig_instances:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return gpu.mig_handles[index][1]

    def nvmlDeviceIsMigDeviceHandle(self, handle: Any) -> bool:
        """True for a MIG device handle."""
        self._enter("nvmlDeviceIsMigDeviceHandle")
        return ctypes.addressof(handle.contents) in self._mig_by_addr

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        """Friendly objects with pid, usedGpuMemory, gpuInstanceId, computeInstanceId."""
        gpu = self._device("nvmlDeviceGetComputeRunningProcesses", handle)
        out = []
        for pid, used in gpu.processes:
            info = pynvml.c_nvmlProcessInfo_v3_t()
            info.pid = pid
            info.usedGpuMemory = used or 0
            info.gpuInstanceId = info.computeInstanceId = NO_INSTANCE
            obj = pynvml.nvmlStructToFriendlyObject(info)
            obj.usedGpuMemory = used
            out.append(obj)
        return out
