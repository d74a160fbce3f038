"""NVML telemetry source: hot fields every interval, slow counters every N, processes -> jobs.

The `pynvml` module is a constructor argument (the real nvidia-ml-py on a node, the recorded
fake in tests). Costs measured on an H100 (collector/recorded/report.json): hot getters 1-15 us
each; ECC mode, PCIe replay and MIG mode ~140 us and total energy ~2.9 ms, hence the slow
cadence. A getter that raises NotSupported is remembered per GPU and never called again;
GpuIsLost / Unknown Error on a GPU becomes one `gpu_lost` event, not one per interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.base import Observations
from collector.health import SourceHealth
from collector.nvml_slow import MISSING, read_slow
from collector.procs import JobRef, ProcessJobMapper
from timeline.models import Allocation, Event, EventKind, GpuInfo, Sample, Severity
from timeline.pci import normalize_pci_bus_id

_MIB = 1024.0 * 1024.0
_MISSING = MISSING


class GpuLost(Exception):
    """NVML says the GPU is gone (GpuIsLost, Unknown Error)."""


@dataclass
class NvmlGpu:
    """One GPU's handle and identity, and what this source remembers about it."""

    index: int
    handle: Any
    info: GpuInfo
    lost: bool = False
    last_slow: dict[str, Any] = field(default_factory=dict)
    mig_handles: list[Any] = field(default_factory=list)


def call_status(nvml: Any, exc: BaseException) -> str:
    """'unsupported', 'lost' or 'error' for an exception raised by an NVML getter."""
    if isinstance(exc, AttributeError):
        return "unsupported"  # an older nvidia-ml-py without this function
    if not isinstance(exc, nvml.NVMLError):
        return "error"
    value = getattr(exc, "value", None)
    if value in (nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_FUNCTION_NOT_FOUND):
        return "unsupported"
    if value in (nvml.NVML_ERROR_GPU_IS_LOST, nvml.NVML_ERROR_UNKNOWN):
        return "lost"
    return "error"


def as_text(value: Any) -> str:
    """NVML strings arrive as str (nvidia-ml-py >= 11.5) or bytes (older)."""
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlSource:
    """Polled NVML source; call collect() every interval (the agent does, via APScheduler)."""

    name = "nvml"

    def __init__(
        self,
        nvml: Any,
        *,
        node: str,
        slow_every: int = 6,
        procs_every: int = 1,
        proc_mapper: ProcessJobMapper | None = None,
        clock: Callable[[], float] = time.time,
        health: SourceHealth | None = None,
    ) -> None:
        self.nvml = nvml
        self.node = node
        self.slow_every = max(1, slow_every)
        self.procs_every = max(1, procs_every)
        self.proc_mapper = proc_mapper
        self.clock = clock
        self.health = health or SourceHealth("nvml")
        self.gpus: list[NvmlGpu] = []
        # (gpu index, getter, args) NVML said NotSupported for: never asked again.
        self.unsupported: set[tuple[int, str, tuple[Any, ...]]] = set()
        self._tick = 0
        self._opened = False
        self._driver: str | None = None
        self._held: dict[tuple[JobRef, int], float] = {}  # (job, gpu index) -> first seen

    # --- lifecycle ----------------------------------------------------------------------

    def open(self) -> None:
        """nvmlInit and enumerate GPUs; raises the NVML error if the driver is not there."""
        self.nvml.nvmlInit()
        self._driver = self._try(lambda: as_text(self.nvml.nvmlSystemGetDriverVersion()))
        self.gpus = []
        for index in range(self.nvml.nvmlDeviceGetCount()):
            try:
                handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
                self.gpus.append(NvmlGpu(index, handle, self._identity(index, handle)))
            except Exception as exc:  # one bad GPU must not hide the others
                self.health.error(f"gpu {index} handle", exc)
        self._opened = True

    def close(self) -> None:
        """nvmlShutdown (reference counted by NVML)."""
        if self._opened:
            self._opened = False
            self._try(self.nvml.nvmlShutdown)

    def gpu_map(self) -> dict[str, tuple[str, int]]:
        """PCI bus id (normalized) -> (GPU UUID, index), for the kernel-log source."""
        return {g.info.pci_bus_id: (g.info.uuid, g.index) for g in self.gpus if g.info.pci_bus_id}

    def _identity(self, index: int, handle: Any) -> GpuInfo:
        nvml = self.nvml
        uuid = as_text(nvml.nvmlDeviceGetUUID(handle))
        pci = self._try(lambda: as_text(nvml.nvmlDeviceGetPciInfo(handle).busId))
        mem = self._try(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total / _MIB)
        mig = self._try(lambda: nvml.nvmlDeviceGetMigMode(handle)[0])
        return GpuInfo(
            uuid=uuid,
            node=self.node,
            index=index,
            pci_bus_id=normalize_pci_bus_id(pci),
            name=self._try(lambda: as_text(nvml.nvmlDeviceGetName(handle))),
            serial=self._try(lambda: as_text(nvml.nvmlDeviceGetSerial(handle))),
            memory_total_mb=mem,
            mig_mode=None if mig is None else bool(mig == nvml.NVML_DEVICE_MIG_ENABLE),
            driver_version=self._driver,
        )

    def _try(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            if call_status(self.nvml, exc) != "unsupported":
                self.health.error(f"{getattr(fn, '__name__', 'call')}", exc)
            return None

    # --- collect ------------------------------------------------------------------------

    def collect(self) -> Observations:
        """One poll: hot fields of every GPU; slow counters and processes on their cadence."""
        obs = Observations()
        if not self._opened:
            try:
                self.open()
            except Exception as exc:
                self.health.error("nvmlInit", exc)
                return obs
            obs.gpus.extend(g.info for g in self.gpus)
        slow = self._tick % self.slow_every == 0
        procs = self.proc_mapper is not None and self._tick % self.procs_every == 0
        self._tick += 1
        now = self.clock()
        for gpu in self.gpus:
            try:
                sample = self.hot_sample(gpu, now)
                if slow:
                    self._slow(gpu, sample, obs, now)
            except GpuLost as exc:
                self._mark_lost(gpu, exc, obs, now)
                continue
            if gpu.lost:
                gpu.lost = False  # it answers again (e.g. after a reset); say so once
                self.health.error(f"gpu {gpu.index} answers again")
            obs.samples.append(sample)
        if procs:
            obs.allocations.extend(self._allocations(now))
        return obs

    def call(self, gpu: NvmlGpu, fn_name: str, *args: Any) -> Any:
        """Call an NVML getter on a GPU: _MISSING if unsupported (remembered) or failed."""
        key = (gpu.index, fn_name, args)
        if key in self.unsupported:
            return _MISSING
        try:
            return getattr(self.nvml, fn_name)(gpu.handle, *args)
        except Exception as exc:
            status = call_status(self.nvml, exc)
            if status == "unsupported":
                self.unsupported.add(key)
            elif status == "lost":
                raise GpuLost(f"{fn_name}: {exc}") from exc
            else:
                self.health.error(f"{fn_name}", exc)
            return _MISSING

    def field_values(self, gpu: NvmlGpu, field_ids: list[int]) -> dict[int, float]:
        """Field values by id, skipping ids known unsupported; remembers per-field NotSupported."""
        wanted = [f for f in field_ids if (gpu.index, "field", (f,)) not in self.unsupported]
        if not wanted:
            return {}
        values = self.call(gpu, "nvmlDeviceGetFieldValues", tuple(wanted))
        if values is _MISSING:
            return {}
        out: dict[int, float] = {}
        for fv in values:
            if fv.nvmlReturn == self.nvml.NVML_SUCCESS:
                out[int(fv.fieldId)] = _field_value(self.nvml, fv)
            elif fv.nvmlReturn == self.nvml.NVML_ERROR_NOT_SUPPORTED:
                self.unsupported.add((gpu.index, "field", (int(fv.fieldId),)))
        return out

    def hot_sample(self, gpu: NvmlGpu, now: float) -> Sample:
        """The hot fields of one GPU (raises GpuLost)."""
        nv, call = self.nvml, self.call
        row: dict[str, Any] = {"ts": now, "gpu_uuid": gpu.info.uuid}
        util = call(gpu, "nvmlDeviceGetUtilizationRates")
        if util is not _MISSING:
            row["util_gpu"], row["util_mem"] = float(util.gpu), float(util.memory)
        mem = call(gpu, "nvmlDeviceGetMemoryInfo")
        if mem is not _MISSING:
            row["mem_used_mb"], row["mem_total_mb"] = mem.used / _MIB, mem.total / _MIB
        power = call(gpu, "nvmlDeviceGetPowerUsage")
        if power is not _MISSING:
            row["power_w"] = power / 1000.0
        temp = call(gpu, "nvmlDeviceGetTemperature", nv.NVML_TEMPERATURE_GPU)
        if temp is not _MISSING:
            row["temp_gpu"] = float(temp)
        clock = call(gpu, "nvmlDeviceGetClockInfo", nv.NVML_CLOCK_SM)
        if clock is not _MISSING:
            row["sm_clock_mhz"] = float(clock)
        reasons = call(gpu, "nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is _MISSING:
            reasons = call(gpu, "nvmlDeviceGetCurrentClocksThrottleReasons")
        if reasons is not _MISSING:
            row["clock_event_reasons"] = int(reasons)
        mem_temp = self.field_values(gpu, [nv.NVML_FI_DEV_MEMORY_TEMP])
        if mem_temp:
            row["temp_mem"] = next(iter(mem_temp.values()))
        # Values are typed above; skipping validation keeps the hot path in microseconds.
        return Sample.model_construct(**row)

    def _slow(self, gpu: NvmlGpu, s: Sample, obs: Observations, now: float) -> None:
        read_slow(self, gpu, s, obs, now)

    def _mark_lost(self, gpu: NvmlGpu, exc: GpuLost, obs: Observations, now: float) -> None:
        if gpu.lost:
            return
        gpu.lost = True
        self.health.error(f"gpu {gpu.index} lost", exc)
        obs.events.append(
            Event(
                ts=now,
                node=self.node,
                source="nvml",
                kind=EventKind.GPU_LOST,
                gpu_uuid=gpu.info.uuid,
                pci_bus_id=gpu.info.pci_bus_id,
                severity=Severity.CRITICAL,
                message=f"NVML: GPU {gpu.info.pci_bus_id} ({gpu.info.uuid}) is lost: {exc}",
                raw=str(exc),
                payload={"index": gpu.index, "error": str(exc.__cause__ or exc)},
            )
        )

    # --- processes -> jobs --------------------------------------------------------------

    def _allocations(self, now: float) -> list[Allocation]:
        assert self.proc_mapper is not None
        seen: set[tuple[JobRef, int]] = set()
        for gpu in self.gpus:
            if gpu.lost:
                continue
            for pid in self._pids(gpu):
                ref = self.proc_mapper.job_for_pid(pid)
                if ref is not None:
                    seen.add((ref, gpu.index))
        out = []
        for key in seen - self._held.keys():
            self._held[key] = now
            out.append(self._allocation(key, start=now, end=None))
        for key in set(self._held) - seen:
            out.append(self._allocation(key, start=self._held.pop(key), end=now))
        return out

    def _pids(self, gpu: NvmlGpu) -> list[int]:
        handles = [gpu.handle, *gpu.mig_handles]
        pids: list[int] = []
        for handle in handles:
            try:
                procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception as exc:
                if call_status(self.nvml, exc) == "error":
                    self.health.error("nvmlDeviceGetComputeRunningProcesses", exc)
                continue
            pids.extend(int(p.pid) for p in procs)
        return pids

    def _allocation(
        self, key: tuple[JobRef, int], *, start: float, end: float | None
    ) -> Allocation:
        ref, index = key
        uuid = next((g.info.uuid for g in self.gpus if g.index == index), None)
        return Allocation(
            scheduler=ref.scheduler,
            job_id=ref.job_id,
            node=self.node,
            gpu_index=index,
            gpu_uuid=uuid,
            start_ts=start,
            end_ts=end,
        )


def _field_value(nvml: Any, fv: Any) -> float:
    kind = int(fv.valueType)
    if kind == nvml.NVML_VALUE_TYPE_DOUBLE:
        return float(fv.value.dVal)
    if kind == nvml.NVML_VALUE_TYPE_UNSIGNED_INT:
        return float(fv.value.uiVal)
    if kind == nvml.NVML_VALUE_TYPE_UNSIGNED_LONG:
        return float(fv.value.ulVal)
    if kind == nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        return float(fv.value.sllVal)
    if kind == nvml.NVML_VALUE_TYPE_SIGNED_INT:
        return float(fv.value.siVal)
    return float(fv.value.ullVal)
