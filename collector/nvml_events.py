"""NVML event source: Xid and ECC events from an NVML event set, on their own thread.

nvmlEventSetWait blocks up to `wait_ms`, so each event is emitted (and spooled) the moment NVML
hands it over rather than at the next poll. On the recorded H100 a wild write gave event type 8
(XidCriticalError) with eventData 31 and gpu/compute instance ids 0xFFFFFFFF (no MIG).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from collector.base import Emit, Observations
from collector.health import SourceHealth
from collector.nvml import as_text, call_status
from timeline.models import Event, EventKind, Severity
from timeline.pci import normalize_pci_bus_id

_NO_INSTANCE = 0xFFFFFFFF


def wanted_event_types(nvml: Any) -> int:
    """Xid, single- and double-bit ECC events."""
    return int(
        nvml.nvmlEventTypeXidCriticalError
        | nvml.nvmlEventTypeSingleBitEccError
        | nvml.nvmlEventTypeDoubleBitEccError
    )


class NvmlEventSource:
    """StreamingSource: registers every GPU for Xid/ECC events and emits each one at once."""

    name = "nvml_events"

    def __init__(
        self,
        nvml: Any,
        *,
        node: str,
        wait_ms: int = 500,
        clock: Callable[[], float] = time.time,
        health: SourceHealth | None = None,
    ) -> None:
        self.nvml = nvml
        self.node = node
        self.wait_ms = wait_ms
        self.clock = clock
        self.health = health or SourceHealth("nvml_events")
        self.registered: dict[str, int] = {}  # uuid -> event mask
        self._bus: dict[str, str | None] = {}
        self.ready = threading.Event()  # set once every GPU is registered

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Wait for NVML events until `stop` is set; never raises."""
        nv = self.nvml
        try:
            nv.nvmlInit()
        except Exception as exc:
            self.health.error("nvmlInit", exc)
            self.ready.set()
            return
        event_set = None
        try:
            event_set = nv.nvmlEventSetCreate()
            self._register_all(event_set)
            self.ready.set()
            while not stop.is_set():
                event = self._wait(event_set, stop)
                if event is not None:
                    emit(Observations(events=[event]))
        except Exception as exc:
            self.health.error("event loop", exc)
        finally:
            self.ready.set()
            if event_set is not None:
                self._quiet(lambda: nv.nvmlEventSetFree(event_set))
            self._quiet(nv.nvmlShutdown)

    def _register_all(self, event_set: Any) -> None:
        nv, wanted = self.nvml, wanted_event_types(self.nvml)
        for index in range(nv.nvmlDeviceGetCount()):
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                uuid = as_text(nv.nvmlDeviceGetUUID(handle))
                self._bus[uuid] = normalize_pci_bus_id(
                    as_text(nv.nvmlDeviceGetPciInfo(handle).busId)
                )
                mask = wanted & int(nv.nvmlDeviceGetSupportedEventTypes(handle))
                self.registered[uuid] = self._register(handle, mask, event_set)
            except Exception as exc:
                self.health.error(f"register gpu {index}", exc)

    def _register(self, handle: Any, mask: int, event_set: Any) -> int:
        """Register the mask at once; if NVML refuses, type by type (keep what it accepts)."""
        try:
            self.nvml.nvmlDeviceRegisterEvents(handle, mask, event_set)
            return mask
        except Exception as exc:
            if call_status(self.nvml, exc) != "unsupported":
                raise
        got = 0
        for bit in (1 << i for i in range(64) if mask >> i & 1):
            try:
                self.nvml.nvmlDeviceRegisterEvents(handle, bit, event_set)
                got |= bit
            except Exception as exc:
                if call_status(self.nvml, exc) != "unsupported":
                    raise
        return got

    def _wait(self, event_set: Any, stop: threading.Event) -> Event | None:
        nv = self.nvml
        try:
            data = nv.nvmlEventSetWait(event_set, self.wait_ms)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) != nv.NVML_ERROR_TIMEOUT:
                self.health.error("nvmlEventSetWait", exc)
                stop.wait(1.0)  # e.g. GPU lost: do not spin; the polled source reports it
            return None
        return self.to_event(data)

    def to_event(self, data: Any) -> Event:
        """One c_nvmlEventData_t as an Event (kind xid with the Xid as code, or ecc)."""
        nv, now = self.nvml, self.clock()
        try:
            uuid: str | None = as_text(nv.nvmlDeviceGetUUID(data.device))
        except Exception as exc:
            self.health.error("event device uuid", exc)
            uuid = None
        bus = self._bus.get(uuid or "")
        etype, edata = int(data.eventType), int(data.eventData)
        gi, ci = int(data.gpuInstanceId), int(data.computeInstanceId)
        payload: dict[str, Any] = {
            "event_type": etype,
            "event_data": edata,
            "gpu_instance_id": None if gi == _NO_INSTANCE else gi,
            "compute_instance_id": None if ci == _NO_INSTANCE else ci,
        }
        raw = (
            f"nvmlEventData(eventType=0x{etype:08X}, eventData={edata}, "
            f"gpuInstanceId={gi}, computeInstanceId={ci}) on {uuid}"
        )
        if etype == nv.nvmlEventTypeXidCriticalError:
            kind, code, severity = EventKind.XID, edata, Severity.ERROR
            message = f"NVML Xid {edata} on GPU {bus} ({uuid})"
        elif etype in (nv.nvmlEventTypeSingleBitEccError, nv.nvmlEventTypeDoubleBitEccError):
            dbe = etype == nv.nvmlEventTypeDoubleBitEccError
            kind, code = EventKind.ECC, None
            severity = Severity.ERROR if dbe else Severity.WARNING
            payload["ecc"] = "dbe" if dbe else "sbe"
            message = f"NVML {'double' if dbe else 'single'}-bit ECC event on GPU {bus} ({uuid})"
        else:
            kind, code, severity = EventKind.OTHER, None, Severity.INFO
            message = f"NVML event 0x{etype:X} ({edata}) on GPU {bus} ({uuid})"
        return Event(
            ts=now,
            node=self.node,
            source="nvml",
            kind=kind,
            gpu_uuid=uuid,
            pci_bus_id=bus,
            code=code,
            severity=severity,
            message=message,
            raw=raw,
            payload=payload,
        )

    def _quiet(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:
            self.health.error("cleanup", exc)
