"""The fake NVML is faithful: its values are the recorded H100's, its types nvidia-ml-py's own."""

from __future__ import annotations

import ctypes
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pynvml
import pytest

from collector.fakenvml import FakeNvml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


@pytest.fixture(scope="module")
def smi() -> ET.Element:
    gpu = ET.parse(FIXTURES / "nvidia-smi-q.xml").getroot().find("gpu")
    assert gpu is not None
    return gpu


def _text(node: ET.Element, path: str) -> str:
    found = node.find(path)
    assert found is not None and found.text is not None, path
    return found.text.strip()


def test_identity_matches_nvidia_smi_q_of_the_recorded_h100(smi: ET.Element) -> None:
    nv = FakeNvml()
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetUUID(h) == _text(smi, "uuid")
    assert nv.nvmlDeviceGetSerial(h) == _text(smi, "serial")
    assert nv.nvmlDeviceGetName(h) == _text(smi, "product_name")
    assert nv.nvmlDeviceGetPciInfo(h).busId == _text(smi, "pci/pci_bus_id")
    root = ET.parse(FIXTURES / "nvidia-smi-q.xml").getroot()
    assert nv.nvmlSystemGetDriverVersion() == _text(root, "driver_version")
    total_mib = int(_text(smi, "fb_memory_usage/total").split()[0])
    assert nv.nvmlDeviceGetMemoryInfo(h).total // 2**20 == total_mib
    rows = nv.nvmlDeviceGetRemappedRows(h)
    assert rows[0] == int(_text(smi, "remapped_rows/remapped_row_corr"))
    assert rows[1] == int(_text(smi, "remapped_rows/remapped_row_unc"))
    assert nv.nvmlDeviceGetPcieReplayCounter(h) == int(_text(smi, "pci/replay_counter"))
    assert _text(smi, "mig_mode/current_mig") == "Disabled" and nv.nvmlDeviceGetMigMode(h)[0] == 0


def test_values_match_report_json_and_trace() -> None:
    report = json.loads((FIXTURES / "report.json").read_text())
    trace = [
        json.loads(x)
        for x in (FIXTURES / "trace_idle_busy_idle.jsonl").read_text().split("\n")
        if x
    ]
    clock = [0.0]
    nv = FakeNvml(clock=lambda: clock[0])
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetSupportedEventTypes(h) == report["events_supported_mask"]
    assert nv.nvmlDeviceGetTotalEnergyConsumption(h) == int(report["percall"]["energy_mj"]["value"])
    for i in (0, 50, 120):
        clock[0] = trace[i]["t"] - trace[0]["t"] + 1e-6
        assert nv.nvmlDeviceGetPowerUsage(h) == trace[i]["power_mw"]
        assert nv.nvmlDeviceGetUtilizationRates(h).gpu == trace[i]["util"]
        assert nv.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == trace[i]["sm_clock"]


def test_errors_are_nvidia_ml_py_classes_with_real_codes() -> None:
    nv = FakeNvml()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetCount()
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported) as exc:
        nv.nvmlDeviceGetRetiredPages(h, 0)  # "Not Supported" on the H100 (report.json)
    assert exc.value.value == 3 and str(exc.value) == "Not Supported"
    es = nv.nvmlEventSetCreate()
    with pytest.raises(pynvml.NVMLError_Timeout):
        nv.nvmlEventSetWait(es, 1)  # report.json: event_wait "Timeout"
    nv.lose_gpu(0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nv.nvmlDeviceGetPowerUsage(h)


def test_handles_and_event_data_are_the_real_ctypes_structures() -> None:
    nv = FakeNvml(gpus=3)
    nv.nvmlInit()
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(3)]
    assert all(isinstance(h, pynvml.c_nvmlDevice_t) for h in handles)
    es = nv.nvmlEventSetCreate()
    nv.nvmlDeviceRegisterEvents(handles[2], pynvml.nvmlEventTypeXidCriticalError, es)
    nv.queue_event(1, pynvml.nvmlEventTypeXidCriticalError, 79)  # GPU 1 not registered
    nv.queue_event(2, pynvml.nvmlEventTypeXidCriticalError, 31)
    data = nv.nvmlEventSetWait(es, 100)
    assert isinstance(data, pynvml.c_nvmlEventData_t)
    assert ctypes.addressof(data.device.contents) == ctypes.addressof(handles[2].contents)
    assert (data.eventType, data.eventData, data.gpuInstanceId) == (8, 31, 0xFFFFFFFF)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nv.nvmlEventSetWait(es, 1)


def test_simulated_gpus_have_distinct_uuids_bus_ids_and_serials() -> None:
    nv = FakeNvml(gpus=8)
    ids = [(g.uuid, g.pci_bus_id, g.serial) for g in (nv.gpu(i) for i in range(8))]
    for column in zip(*ids, strict=True):
        assert len(set(column)) == 8


def test_registering_an_unsupported_event_type_is_refused_like_nvml() -> None:
    nv = FakeNvml()
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    es = nv.nvmlEventSetCreate()
    unsupported = 1 << 40
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceRegisterEvents(h, unsupported, es)
