"""Health-counter functions of collector.fakenvml.FakeNvml: ECC, row remapping, retired pages,
PCIe replays and NvLink (kept apart to keep modules small)."""

from __future__ import annotations

from typing import Any

from collector.fakenvml_data import FakeGpu


class FakeHealthMixin:
    """The counters a health check reads, as the recorded H100 reported them."""

    identity: dict[str, Any]

    def _device(self, fn: str, handle: Any) -> FakeGpu:
        raise NotImplementedError

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        """[current, pending] as recorded (enabled)."""
        self._device("nvmlDeviceGetEccMode", handle)
        return list(self.identity["ecc_mode"])

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int:
        """ECC totals (all 0 on the recorded H100)."""
        gpu = self._device("nvmlDeviceGetTotalEccErrors", handle)
        return gpu.ecc.get((error_type, counter_type), 0)

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        """(correctable, uncorrectable, pending, failure) as recorded."""
        gpu = self._device("nvmlDeviceGetRemappedRows", handle)
        if gpu.remapped_rows is not None:
            return gpu.remapped_rows
        return tuple(self.identity["remapped_rows"])

    def nvmlDeviceGetRetiredPages(self, handle: Any, cause: int) -> list[int]:
        """NotSupported on the H100 (it remaps rows instead)."""
        self._device("nvmlDeviceGetRetiredPages", handle)
        return []

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        """PCIe replay counter as recorded."""
        self._device("nvmlDeviceGetPcieReplayCounter", handle)
        return int(self.identity["pcie_replay"])

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        """NotSupported on the recorded (PCIe) H100."""
        self._device("nvmlDeviceGetNvLinkState", handle)
        return 0

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int:
        """NotSupported on the recorded (PCIe) H100."""
        self._device("nvmlDeviceGetNvLinkErrorCounter", handle)
        return 0
