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


# One line per convention, written from the emitter's own format (its source is cited in the
# rule family or in hosts.py); the host is what the convention names, never a guess.
HOST_LINES = [
    ("Feb 02 09:51:48 gpu-07 slurmd[12912]: slurmd: fatal: can't stat gres.conf file", "gpu-07"),
    ("2024-05-01T10:00:00+0000 gpu-07 systemd[1]: slurmd.service: Failed", "gpu-07"),
    ("[gpu-07:10319] *** Process received signal ***", "gpu-07"),
    ("[gpu-07][[32355,1],2][btl_tcp_endpoint.c:796:x] connect() to 10.0.0.8 failed", "gpu-07"),
    ("mpirun noticed that process rank 3 with PID 9 on node gpu-07 exited on signal 9", "gpu-07"),
    ("  Remote daemon: [[11377,0],1] on node gpu-08", "gpu-08"),
    ("=   RANK 0 PID 5490 RUNNING AT gpu-07", "gpu-07"),
    ("=   PID 108257 RUNNING AT alice@gpu-07", "gpu-07"),
    ("  Hostname:    gpu-node-07", "gpu-node-07"),
    ("Exec host:  gpu-2-17/5", "gpu-2-17"),
    ("hostname     node008.cm.cluster  ", "node008.cm.cluster"),
    ("Memory on the node (IP: 10.0.0.7, ID: fc2b) where the task was running", "10.0.0.7"),
    ("(raylet, ip=10.0.0.7) node_manager.cc:3277: 2 Workers killed", "10.0.0.7"),
    ("2023-05-22T03:06:53.935282247Z \tip: 172.28.1.11", "172.28.1.11"),
    ("  Normal   NodeHasDiskPressure   4m23s  kubelet, minikube  Node minikube status", "minikube"),
    # kubectl 1.6's describe Events row: the From column is the EventSource printed with %v
    (
        "  4m\t\t4m\t\t1\t{kubelet gpu-07}\tspec.containers{c}\tWarning\t\tBackOff\t\tBack-off",
        "gpu-07",
    ),
    ("pdsh@login1: gpu-07: ssh exited with exit code 1", "gpu-07"),
    # launcher labels in front of NCCL's own prefix, and NCCL's prefix behind a logger's stamp
    (
        "[1,0]<stderr>:gpu-07:1234:5678 [0] NCCL WARN Call to connect returned Connection refused",
        "gpu-07",
    ),
    ("0: gpu-08:1:2 [3] NCCL WARN socketProgress: Connection closed by remote peer x<1>", "gpu-08"),
    ("2024-01-01 12:00:00,123 - INFO - gpu-09:12:34 [0] misc/socket.cc:58 NCCL WARN x", "gpu-09"),
]


@pytest.mark.parametrize(("line", "host"), HOST_LINES, ids=[h[0][:40] for h in HOST_LINES])
def test_each_emitters_host_convention_names_its_host(line: str, host: str) -> None:
    assert host_in_line(line) == host


def test_lines_that_only_look_like_conventions_name_no_host() -> None:
    assert host_in_line("hostname: ") is None
    assert host_in_line("Error: something failed on the node") is None
    assert (
        host_in_line("mpirun noticed that process rank 1 with PID x on node HOSTNAME exited")
        is None
    )
    assert host_in_line("=   EXIT CODE: 9") is None
    assert host_in_line("[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught") is None


def test_a_pdsh_prefix_names_its_host_only_when_it_recurs() -> None:
    text = (
        "10.0.0.6: Traceback (most recent call last):\n"
        "10.0.0.6: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "10.0.0.7: [INFO] rank 1 waiting\n"
    )
    assert explain_text(text).node == "10.0.0.6"
    once = "gpu07: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert explain_text(once).node is None  # one "word: " prefix is not a pdsh convention


def test_a_wrapped_launcher_line_is_read_whole() -> None:
    # Open MPI's help text wraps at 80 columns in a terminal or an issue paste.
    got = explain_text(
        "mpiexec noticed that process rank 0 with PID 10313 on node proton exited on \n"
        "signal 6 (Aborted).\n"
    )
    assert (got.category, got.blame, got.node) == ("user_code", "job", "proton")


@pytest.mark.parametrize(
    ("healthy", "failing"),
    [
        ("GPU Recovery Action                                : None", "Reset"),
        ("HW Slowdown                                    : Not Active", "Active"),
    ],
)
def test_nvidia_smi_q_status_fields_read_structurally(healthy: str, failing: str) -> None:
    # The recorded healthy H100 document with one status field set as nvidia-smi(1) prints it.
    text = _fixture("nvidia_smi_q_h100_healthy.txt")
    assert healthy in text
    line = healthy.rsplit(":", 1)[0] + f": {failing}"
    got = explain_text(text.replace(healthy, line))
    assert got.category == "gpu_hardware"
    assert [e.strip() for e in got.evidence] == [line.strip()]


def test_open_mpis_node_died_help_text_names_the_node_on_its_hostname_line() -> None:
    # orte/mca/errmgr/base/help-errmgr-base.txt [node-died], the older wording: the node is
    # printed on its own "  hostname:  %s" line below the sentence, after a blank line
    text = (
        "--------------------------------------------------------------------------\n"
        "ORTE has lost communication with its daemon located on node:\n"
        "\n"
        "  hostname:  gpu-07\n"
        "\n"
        "This is usually due to either a failure of the TCP network\n"
        "connection to the node, or possibly an internal failure of\n"
        "the daemon itself. We cannot recover from this failure, and\n"
        "therefore will terminate the job.\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "gpu-07")


def test_a_node_name_wrapped_onto_the_next_line_is_read_with_its_sentence() -> None:
    # python/ray/memory_monitor.py (Ray 1.x): "More than %d%% of the memory on node %s is used
    # (%s / %s GB). The top 10 memory consumers are:", cut by a terminal before the node
    text = (
        "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node\n"
        "gpu-07 is used (11.8 / 12.3 GB). The top 10 memory consumers are:\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("oom_host", "job", "gpu-07")


def test_a_finished_sentence_is_not_joined_with_the_line_below_it() -> None:
    # torch/utils/data/_utils/signal_handling.py's message ends its sentence; the next line is
    # Python's own chaining note, not its continuation
    text = (
        "RuntimeError: DataLoader worker (pid 108439) is killed by signal: Killed.\n"
        "The above exception was the direct cause of the following exception:\n"
    )
    events = read_events(text)
    assert any(ev.raw == "RuntimeError: DataLoader worker (pid 108439) is killed by signal: Killed."
               for ev in events)  # fmt: skip
    assert explain_text(text).category == "oom_host"


@pytest.mark.parametrize(
    ("rows", "want"),
    [
        (
            "4711         train        gpu      alice          8    TIMEOUT      0:0 ",
            ("scheduler", "job"),
        ),
        (
            "4711         train        gpu      alice          8 OUT_OF_ME+    0:125 \n"
            "4711.batch        batch                 alice          8 OUT_OF_ME+    0:125 ",
            ("oom_host", "job"),
        ),
        (
            "4711         train        gpu      alice          8     FAILED      2:0 ",
            ("user_code", "job"),
        ),
        ("4711_3       FAILED      0:11 ", ("user_code", "job")),  # --brief, an array task
    ],
)
def test_sacct_rows_pasted_without_their_header_are_read_by_state_and_exit_code(
    rows: str, want: tuple[str, str]
) -> None:
    got = explain_text(rows)
    assert (got.category, got.blame) == want


def test_a_headerless_row_needs_a_slurm_job_state_before_its_exit_code() -> None:
    assert explain_text("4711   some   words   HELLO_WORLD   0:1").category is None


_SMI_OLD = (
    "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
    "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
    "|===============================+======================+======================|\n"
    "|   0  Tesla V100-SXM2...  On   | 00000000:00:04.0 Off |                    0 |\n"
    "| N/A   34C    P0    41W / 300W |      0MiB / 16160MiB |      0%      Default |\n"
    "+-------------------------------+----------------------+----------------------+\n"
    "|   1  Tesla V100-SXM2...  On   | 00000000:00:05.0 Off |                  {n} |\n"
    "| N/A   36C    P0    42W / 300W |      0MiB / 16160MiB |      0%      Default |\n"
)
_SMI_NEW = (
    "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
    "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n"
    "|=========================================+========================+======================|\n"
    "|   3  NVIDIA H100 80GB HBM3          On  |   00000000:9B:00.0 Off |                  {n} |\n"
    "| N/A   30C    P0             69W /  700W |       1MiB /  81559MiB |      0%      Default |\n"
)


@pytest.mark.parametrize(("table", "pci"), [(_SMI_OLD, "0000:00:05.0"), (_SMI_NEW, "0000:9b:00.0")])
def test_nvidia_smi_tables_uncorrectable_ecc_count_above_zero_is_the_gpus_memory(
    table: str, pci: str
) -> None:
    got = explain_text(table.replace("{n}", " 2"))
    assert (got.category, got.blame, got.gpu) == ("gpu_hardware", "node", pci)
    assert explain_text(table.replace("{n}", " 0")).category is None
    assert explain_text(table.replace("{n}", "N/A")).category is None


def test_an_ecc_count_column_is_read_only_under_nvidia_smis_own_header() -> None:
    row = _SMI_NEW.splitlines()[3].replace("{n}", " 2")
    assert explain_text(row).category is None
