"""Probe set twenty-eight, GB200/NVL72-era node services: the NVIDIA IMEX daemon and
GPUDirect Storage (cuFile), read as documented.

Formats, each from its source (never a corpus case):
- IMEX's log ('[Mon DD YYYY HH:MM:SS] [LEVEL] [tid N] message', as the DRA driver's
  compute-domain daemon prints it in kubernetes-sigs/dra-driver-nvidia-gpu#1465) and its
  [ERROR] lines when multi-node NVLink memory sharing failed on GB200/GB300
  (kubernetes-sigs/dra-driver-nvidia-gpu#948); the IMEX guide (connections, IMEX channels);
  systemd's '<unit>: Failed with result '%s'' for nvidia-imex.service;
- cuFile's CUfileOpError names and cufileop_status_error() strings (cufile.h, libcufile-dev
  1.5.1.14 and nvidia-cufile-cu12 1.13.1.3), and cufile.log's
  ' DD-MM-YYYY HH:MM:SS:ms [pid=N tid=N] LEVEL  module:line message' lines (GDS troubleshooting
  guide).

Labels: IMEX failing to share a job's memory is the IMEX domain's (interconnect/infra, as the
Xid catalog reads IMEX; IMEX's node ids name no host); the IMEX service dying on a node is that
node's (node/node); nvidia-fs missing or failing is the node's GDS stack (node/node); cuFile
rejecting the caller's buffers or flags is the program's (user_code/job); INFO/NOTICE lines,
compatible-mode fallbacks included, are nothing to explain.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

IMEX_ERRORS = (
    "Failed to get new memory reference with rc: 87",
    "Failed to allocate memory reference.",
    "Failed to get export ref for UUID: 5a3e1c2d-0b7f-4f1e-9d61-3c0a8e2b4f10 for request from "
    "node id 0",
    "Received import response from node id 0 with failure status 3",
)
CUFILE_LOG = " 06-11-2025 20:12:02:865 [pid=157254 tid=157254] {level}  {module} {message}\n"


@pytest.mark.parametrize("message", IMEX_ERRORS)
def test_an_imex_memory_reference_failure_is_the_imex_domains(message: str) -> None:
    text = (
        "[Mar 17 2026 06:40:33] [INFO] [tid 77] IMEX version 580.105.08 is running with the "
        "following configuration options:\n"
        f"[Mar 17 2026 06:52:10] [ERROR] [tid 91] {message}\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", None), text


def test_imex_names_no_host_neither_its_node_id_nor_the_daemon_that_logged_it() -> None:
    # IMEX's "node id N" is an index into its nodes_config, and a failed import is the domain's
    text = (
        "Nov 29 10:01:02 gb200-n07 nvidia-imex[2231]: [Nov 29 2026 10:01:02] [ERROR] [tid 91] "
        "Received import response from node id 2 with failure status 3\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", None)


@pytest.mark.parametrize(
    "line",
    [
        "[Sep 18 2026 06:40:33] [INFO] [tid 77] IMEX version 580.159.04 is running with the "
        "following configuration options:",
        "[Sep 18 2026 06:40:33] [INFO] [tid 77] Treating node config entry "
        "'compute-domain-daemon-7555db58d7-0000' as a host name.",
        "Nov 29 10:01:02 gb200-n07 systemd[1]: Started NVIDIA IMEX service.",
    ],
)
def test_imex_starting_up_is_nothing_to_explain(line: str) -> None:
    assert explain_text(line + "\n").category is None


def test_the_imex_service_failing_is_the_nodes() -> None:
    text = (
        "Nov 29 10:01:02 gb200-n07 systemd[1]: nvidia-imex.service: Main process exited, "
        "code=exited, status=1/FAILURE\n"
        "Nov 29 10:01:02 gb200-n07 systemd[1]: nvidia-imex.service: Failed with result "
        "'exit-code'.\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gb200-n07")


@pytest.mark.parametrize(
    "error",
    [
        "cuFile error: nvidia-fs driver is not loaded (5001)",
        "cuFileDriverOpen failed: CU_FILE_DRIVER_NOT_INITIALIZED",
        "RuntimeError: cuFile error: nvidia-fs driver version mismatch",
        "cuFileRead failed: nvidia-fs driver ioctl error",
        "status: CU_FILE_NVFS_SETUP_ERROR (NVFS driver initialization error)",
    ],
)
def test_a_missing_or_failing_nvidia_fs_is_the_nodes(error: str) -> None:
    got = explain_text(error + "\n")
    assert (got.category, got.blame) == ("node", "node"), got.explanation


@pytest.mark.parametrize(
    "error",
    [
        "cuFileRead failed: fd direct IO not set",
        "RuntimeError: cuFile error: pointer range exceeds allocated address range",
        "cuFileBufRegister failed: CU_FILE_CUDA_POINTER_INVALID",
        "cuFileWrite failed: access beyond maximum pinned size",
    ],
)
def test_cufile_rejecting_the_callers_arguments_is_the_jobs(error: str) -> None:
    got = explain_text(error + "\n")
    assert (got.category, got.blame) == ("user_code", "job"), got.explanation


@pytest.mark.parametrize(
    ("level", "module", "message"),
    [
        ("NOTICE", "cufio-drv:720", "running in compatible mode"),
        (
            "NOTICE",
            "cufio:293",
            "cuFileHandleRegister GDS not supported or disabled by config, using cuFile posix "
            "read/write with compat mode enabled",
        ),
        (
            "NOTICE",
            "cufio-rdma:175",
            "nvidia_peermem.ko is not loaded. Disabling UserSpace RDMA access.",
        ),
    ],
)
def test_cufile_fallback_notices_are_nothing_to_explain(
    level: str, module: str, message: str
) -> None:
    text = CUFILE_LOG.format(level=level, module=module, message=message)
    assert explain_text(text).category is None


# nvidia-smi -q's per-GPU Fabric block (nvmlGpuFabricInfo_v3_t): the node's view of the NVLink
# fabric that Fabric Manager or, on GB200 NVL racks, the NVLink Subnet Manager (NMX) runs.
SMI_FABRIC = """==============NVSMI LOG==============

Timestamp                                              : Tue Jun  2 09:49:44 2026
Driver Version                                         : 580.159.04
CUDA Version                                           : 13.0

Attached GPUs                                          : 4
GPU 00000008:01:00.0
    Product Name                                       : NVIDIA GB200
    Fabric
        State                                          : {state}
        Status                                         : {status}
        CliqueId                                       : {clique}
        ClusterUUID                                    : 00000000-0000-0000-0000-000000000000
        Health
            Summary                                    : {summary}
            Bandwidth                                  : Full
    Processes                                          : None
"""


@pytest.mark.parametrize(
    ("state", "status", "summary"),
    [("Completed", "Insufficient Resources", "N/A"), ("Completed", "Success", "Unhealthy")],
)
def test_a_gpu_whose_nvlink_fabric_registration_failed_is_the_nodes_fabric(
    state: str, status: str, summary: str
) -> None:
    text = "root@gb200-n07:~# nvidia-smi -q\n" + SMI_FABRIC.format(
        state=state, status=status, clique=0, summary=summary
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "node", "gb200-n07")


@pytest.mark.parametrize(
    ("state", "status", "summary"),
    [
        ("Completed", "Success", "Healthy"),
        ("In Progress", "N/A", "N/A"),
        ("Not Supported", "Not Supported", "Not Supported"),
    ],
)
def test_a_registered_or_unsupported_fabric_is_nothing_to_explain(
    state: str, status: str, summary: str
) -> None:
    text = SMI_FABRIC.format(state=state, status=status, clique=32766, summary=summary)
    assert explain_text(text).category is None
