"""The on-device NVML check runs its whole logic against the fake and labels the figures fake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import nvml_on_device


@pytest.mark.slow
def test_fake_run_reports_labelled_figures_xid_event_and_saves_fixtures(tmp_path: Path) -> None:
    argv = ["--fake", "--fake-gpus", "2", "--samples", "50", "--agent-seconds", "2"]
    result = nvml_on_device.run([*argv, "--out", str(tmp_path)])
    assert result["fake"] is True and "FAKE" in result["figures"]
    assert result["us_per_gpu_hot_sample"] > 0 and result["gpus"] == 2
    assert result["nvidia_smi_ms"] is None and result["ratio"] is None  # never a made-up figure
    assert result["xid31_nvml_event"] is True
    assert result["agent_rss_mb"] is not None and result["agent_rss_mb"] > 0
    assert result["device"] == "NVIDIA H100 80GB HBM3"
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["us_per_gpu_hot_sample"] == result["us_per_gpu_hot_sample"]
    events = [json.loads(x) for x in (tmp_path / "nvml_events.jsonl").read_text().splitlines()]
    assert [e["code"] for e in events] == [31, 43]
    identity = json.loads((tmp_path / "nvml_identity.json").read_text())
    assert identity[0]["pci_bus_id"] == "0000:00:06.0"
    samples = (tmp_path / "nvml_samples.jsonl").read_text().splitlines()
    assert len(samples) == 2 + 2  # the first full sample and the last hot sweep, per GPU


def test_without_fault_and_agent_the_hot_path_is_still_measured() -> None:
    result = nvml_on_device.run(["--fake", "--samples", "20", "--agent-seconds", "0", "--no-fault"])
    assert result["us_per_gpu_hot_sample"] > 0 and result["agent_rss_mb"] is None
    assert "xid31_nvml_event" not in result
