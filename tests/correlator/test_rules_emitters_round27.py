"""Round twenty-seven: slurmd's fatal gres.conf errors, nvidia-smi's `gpu_recovery_action` query
field and dcgmi dmon's XIDER column, as their emitters print them.

slurmd stops with fatal() ("fatal: " prefix, src/common/log.c) on a gres.conf or GRES definition
it cannot use (SchedMD/slurm src/interfaces/gres.c). `nvidia-smi --query-gpu=...,
gpu_recovery_action --format=csv[,noheader]` prints one comma-separated row per GPU, the action
None / Reset / Reboot / Drain P2P / Drain and Reset (nvmlDeviceGetGpuRecoveryAction;
docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html). `dcgmi
dmon -e 230` prints "#Entity <short names>", "ID", then "GPU <i> <values>", XIDER being field
230, the last Xid (NVIDIA/DCGM dcgmlib/dcgm_fields.h, dcgmi/DeviceMonitor.cpp). See
correlator/rules/emitters/slurm.json (slurmd_gres_conf_fatal) and
correlator/explain/readers_gpu_fields.py. Never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_GRES_FATALS = (
    "gres.conf duplicate records for gpu",
    'gres.conf for gpu, some records have "File" specification while others do not',
    'gres.conf for gpu, some records have "Type=" specification while others do not',
    "gres.conf: duplicate node-local AutoDetect specification does not match the first",
    "Invalid GRES record for gpu, invalid count 4x",
    "Invalid GRES record for gpu, count does not match File value",
    "Invalid GRES data for gpu, Cores=0-63 (only 32 CPUs are available)",
    "GRES gpu has invalid count value 18446744073709551615",
    "can't parse File=/dev/nvidia[0-",
    "File and MultipleFiles options are mutually exclusive",
    "MultipleFiles does not contain multiple files. Use File instead",
    "_merge_gres: Some gpu GRES in slurm.conf have a type while others do not "
    "(gres_ns->gres_cnt_config (4) > tmp_count (2))",
    "error opening/reading /etc/slurm/gres.conf",
)


@pytest.mark.parametrize("message", _GRES_FATALS)
def test_slurmd_exiting_on_gres_conf_in_the_journal_is_that_nodes_fault(message: str) -> None:
    text = f"Mar 03 07:12:44 gpu-a17 slurmd[4021]: fatal: {message}\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-a17")


def test_slurmd_exiting_on_gres_conf_in_its_own_log_is_a_node_fault() -> None:
    text = "[2025-01-09T10:01:02.345] fatal: gres.conf duplicate records for gpu\n"
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "node")


def test_a_gres_conf_line_without_slurmds_fatal_is_not_read_as_slurmd_exiting() -> None:
    assert explain_text("checking gres.conf duplicate records for gpu\n").category is None


_CSV_NOHEADER = "$ nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv,noheader\n"
_CSV_HEADER = "$ nvidia-smi --query-gpu=index,name,gpu_recovery_action --format=csv\n"


@pytest.mark.parametrize("action", ("Reset", "Reboot", "Drain P2P", "Drain and Reset"))
def test_a_gpu_whose_recovery_action_asks_for_work_is_gpu_hardware(action: str) -> None:
    text = _CSV_NOHEADER + f"0, None\n1, {action}\n2, None\n"
    got = explain_text(text)
    assert (got.category, got.blame) == ("gpu_hardware", "node")


def test_a_csv_header_row_names_the_recovery_action_column() -> None:
    text = (
        "index, name, gpu_recovery_action\n"
        "0, NVIDIA H100 80GB HBM3, None\n"
        "1, NVIDIA H100 80GB HBM3, Drain and Reset\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("gpu_hardware", "node")


def test_every_gpu_needing_no_recovery_action_shows_no_failure() -> None:
    text = _CSV_HEADER + "0, NVIDIA A100-SXM4-80GB, None\n1, NVIDIA A100-SXM4-80GB, [N/A]\n"
    assert explain_text(text).category is None


_DMON = """\
$ dcgmi dmon -e 100,230,155 -c 1
#Entity   SMCLK    XIDER    POWER
ID                          W
GPU 0     1980     0        312.4
GPU 1     1980     {xid}        N/A
GPU 2     1980     0        298.0
"""


@pytest.mark.parametrize("xid", ("79", "48", "120", "94"))
def test_a_hardware_xid_in_dcgmi_dmons_xider_column_is_gpu_hardware(xid: str) -> None:
    got = explain_text(_DMON.format(xid=xid))
    assert (got.category, got.blame) == ("gpu_hardware", "node")


def test_an_application_xid_in_dcgmi_dmons_xider_column_is_the_jobs() -> None:
    got = explain_text(_DMON.format(xid="13"))
    assert (got.category, got.blame) == ("user_code", "job")


def test_dcgmi_dmon_with_no_xid_recorded_shows_no_failure() -> None:
    assert explain_text(_DMON.format(xid="0")).category is None


def test_a_dmon_table_without_the_xider_column_is_not_read_for_xids() -> None:
    text = "#Entity   SMCLK    POWER\nID                 W\nGPU 0     1980     79\n"
    assert explain_text(text).category is None
