"""NVML event-set functions of collector.fakenvml.FakeNvml (kept apart to keep modules small)."""

from __future__ import annotations

import ctypes
import queue
from typing import Any

import pynvml

from collector.fakenvml_data import NO_INSTANCE, EventSet, FakeGpu, recorded_xid_events


class FakeEventsMixin:
    """Event sets as NVML has them: register per device and type mask, wait with a timeout."""

    identity: dict[str, Any]
    _gpus: list[FakeGpu]
    _event_sets: dict[int, EventSet]

    def _enter(self, fn: str, handle: Any = None) -> FakeGpu | None:
        raise NotImplementedError

    def _device(self, fn: str, handle: Any) -> FakeGpu:
        raise NotImplementedError

    def queue_event(
        self, index: int, event_type: int, data: int, gi: int = NO_INSTANCE, ci: int = NO_INSTANCE
    ) -> None:
        """Deliver an NVML event (e.g. nvmlEventTypeXidCriticalError, 31) to registered sets."""
        gpu = self._gpus[index]
        for event_set in list(self._event_sets.values()):
            if event_set.registered.get(ctypes.addressof(gpu.struct), 0) & event_type:
                event_set.put(gpu.handle, event_type, data, gi, ci)

    def queue_recorded_xids(self, index: int = 0) -> list[int]:
        """Queue the real Xid events of fault_report.json (31 then 43); returns their codes."""
        codes = []
        for ev in recorded_xid_events():
            self.queue_event(index, int(ev["type"]), int(ev["data"]), int(ev["gi"]), int(ev["ci"]))
            codes.append(int(ev["data"]))
        return codes

    # --- events -------------------------------------------------------------------------

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        """The recorded mask (65439)."""
        self._device("nvmlDeviceGetSupportedEventTypes", handle)
        return int(self.identity["events_supported"])

    def nvmlEventSetCreate(self) -> Any:
        """A new event set (a c_nvmlEventSet_t)."""
        self._enter("nvmlEventSetCreate")
        struct = pynvml.struct_c_nvmlEventSet_t()
        event_set = EventSet(struct)
        self._event_sets[ctypes.addressof(struct)] = event_set
        return event_set.handle

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:
        """Register; NotSupported if any requested type is outside the device's mask."""
        gpu = self._device("nvmlDeviceRegisterEvents", handle)
        if event_types & ~int(self.identity["events_supported"]):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        es = self._event_sets[ctypes.addressof(event_set.contents)]
        addr = ctypes.addressof(gpu.struct)
        es.registered[addr] = es.registered.get(addr, 0) | event_types

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        """The next c_nvmlEventData_t, or NVMLError_Timeout after timeout_ms."""
        self._enter("nvmlEventSetWait")
        es = self._event_sets.get(ctypes.addressof(event_set.contents))
        if es is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        try:
            return es.events.get(timeout=timeout_ms / 1000.0)
        except queue.Empty:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT) from None

    def nvmlEventSetFree(self, event_set: Any) -> None:
        """Free an event set."""
        self._enter("nvmlEventSetFree")
        self._event_sets.pop(ctypes.addressof(event_set.contents), None)
