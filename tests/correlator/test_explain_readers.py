"""Readers of tool output (nvidia-smi, sacct, dcgm-exporter, kubectl) and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from correlator.explain import ExplainInputError, explain_bytes, explain_text
from correlator.explain.hosts import clean_host, host_in_line
from correlator.explain.readers import read_events
from timeline.models import EventKind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
REAL_H100 = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text("utf-8")


def test_healthy_h100_nvidia_smi_q_shows_no_failure() -> None:
    # "Double Bit ECC : N/A" and "HW Thermal Slowdown : Not Active" are status, not faults.
    result = explain_text(_fixture("nvidia_smi_q_h100_healthy.txt"))
    assert result.category is None
    assert result.evidence == []


def test_healthy_dcgm_exporter_metrics_show_no_failure() -> None:
    assert explain_text(_fixture("dcgm_exporter_vks_healthy.txt")).category is None


def test_dcgm_exporter_xid_gauge_names_gpu_and_host_from_labels() -> None:
    # The real line's shape with its value changed from 0 to 79 (the gauge holds the last Xid).
    line = next(
        ln
        for ln in _fixture("dcgm_exporter_vks_healthy.txt").splitlines()
        if ln.startswith("DCGM_FI_DEV_XID_ERRORS")
    )
    result = explain_text(line[: line.rindex("} ")] + "} 79")
    assert (result.category, result.blame, result.xid) == ("gpu_hardware", "node", 79)
    assert result.node == "vks-cluster-0-0-np1-worker-xtxww-xw4wp-wn7j2"
    assert result.gpu == "0000:03:00.0"


@pytest.mark.parametrize("name", ["sacct_22.05.psv", "sacct_22.05.json"])
def test_real_sacct_output_explains_the_time_limit_on_node1(name: str) -> None:
    result = explain_text(_fixture(name))
    assert (result.category, result.blame, result.node) == ("scheduler", "job", "node1")
    assert "time limit" in result.explanation


def test_sacct_table_rows_become_job_state_events_with_their_node() -> None:
    events = [e for e in read_events(_fixture("sacct_22.05.psv")) if e.kind is EventKind.JOB_STATE]
    states = {(e.job_id, e.payload["state"], e.node) for e in events}
    assert ("4", "TIMEOUT", "node1") in states
    assert ("3", "FAILED", "node1") in states


def test_nvidia_smi_q_remap_section_gives_a_row_remap_event() -> None:
    text = (REAL_H100 / "059_nvidia-smi-q-remap-pending.txt").read_text("utf-8")
    events = read_events(text)
    assert [e.kind for e in events] == [EventKind.ROW_REMAP]
    assert events[0].payload == {"pending": True}


def test_hosts_are_taken_only_from_known_conventions() -> None:
    assert (
        host_in_line("Sep 18 20:58:08 yuri-notebook kernel: [ 1936.5] NVRM: x") == "yuri-notebook"
    )
    assert host_in_line("gpu-07:984:1357 [4] NCCL WARN NET/IB : Got completion") == "gpu-07"
    assert host_in_line("slurmstepd: error: *** JOB 4 ON ... CANCELLED AT 2024 ***") is None
    assert host_in_line("Node:           <none>") is None
    assert host_in_line("RuntimeError: CUDA error: an illegal memory access") is None
    assert clean_host("...") is None and clean_host("10.6.0.188") == "10.6.0.188"


def test_empty_input_is_a_null_verdict() -> None:
    result = explain_bytes(b"   \n")
    assert result.category is None and result.node is None and result.evidence == []


def test_binary_input_is_refused_with_a_clear_error() -> None:
    with pytest.raises(ExplainInputError, match="binary"):
        explain_bytes(bytes(range(256)) * 8)


def test_text_without_failure_evidence_is_a_null_verdict() -> None:
    result = explain_text("epoch 1 loss 0.53\nepoch 2 loss 0.41\nsaved checkpoint\n")
    assert result.category is None and result.blame == "unknown"


def test_kubectl_get_nodes_row_names_the_not_ready_node() -> None:
    text = (REAL_H100 / "049_k8s-get-nodes-notready-ip.txt").read_text("utf-8")
    result = explain_text(text)
    assert (result.category, result.node) == ("node", "10.6.0.188")
    assert result.evidence == ["10.6.0.188   NotReady   10d       v1.7.2"]


def test_sinfo_reason_row_names_its_node() -> None:
    text = (REAL_H100 / "046_slurm-sinfo-kill-task-failed.txt").read_text("utf-8")
    assert explain_text(text).node == "ip-10-0-1-23"


def test_gpu_is_lost_form_gives_the_bus_id() -> None:
    text = (REAL_H100 / "086_nvidia-smi-gpu-is-lost.txt").read_text("utf-8")
    result = explain_text(text)
    assert (result.category, result.gpu) == ("gpu_hardware", "0000:02:00.0")


def test_readable_output_names_verdict_node_and_evidence() -> None:
    from correlator.explain import human

    text = (REAL_H100 / "013_fallen-off-bus-syslog-host.txt").read_text("utf-8")
    out = human(explain_text(text))
    assert "gpu_hardware" in out and "yuri-notebook" in out and "Evidence:" in out


def test_dcgmi_diag_all_pass_is_no_failure() -> None:
    assert explain_text(_fixture("dcgmi_diag_r2_pass.txt")).category is None


def test_dcgmi_diag_failed_row_is_a_gpu_fault_on_that_gpu() -> None:
    # The real table's shape (go-dcgm#52) with one result cell changed to a failure, because no
    # public failing run was found: this pins the reader, not a real-world verdict.
    text = _fixture("dcgmi_diag_r2_pass.txt").replace(
        "| Page Retirement/Row Remap | Pass                                           |",
        "| Page Retirement/Row Remap | Fail                                           |\n"
        "|                           | GPU0: Fail                                     |",
    )
    result = explain_text(text)
    assert (result.category, result.blame) == ("gpu_hardware", "node")
    assert any("GPU0: Fail" in line for line in result.evidence)
