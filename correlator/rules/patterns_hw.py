"""Pattern rules for GPU hardware and interconnect faults (checked first, in this order)."""

from __future__ import annotations

from correlator.rules.pattern_rule import (
    _DRAIN,
    GPU,
    NET,
    PatternRule,
    _p,
)
from correlator.taxonomy import Blame

HARDWARE: tuple[PatternRule, ...] = (
    # --- GPU hardware ------------------------------------------------------------------------
    _p(
        "fallen_off_bus",
        r"fallen off the bus",
        GPU,
        Blame.NODE,
        action=_DRAIN + "; reboot if reset fails",
        confidence=0.95,
        summary="the GPU fell off the PCIe bus",
        priority=100,
    ),
    _p(
        "gpu_lost",
        r"GPU is lost|GpuIsLost|NVML_ERROR_GPU_IS_LOST|Unable to determine the device handle for "
        r"(GPU|gpu)\s*\S*:\s*Unknown Error|"
        r"(?<![^\n])(?>[^\n]*?cudaErrorDevicesUnavailable).*lost",
        GPU,
        Blame.NODE,
        action=_DRAIN + "; reboot if reset fails",
        confidence=0.9,
        summary="the driver lost the GPU (nvidia-smi cannot get its handle)",
        priority=95,
    ),
    _p(
        "uncorrectable_ecc",
        # "A.*B" tried once a line, from its first A ((?>...)): a failure there is a failure
        # from every later A on the line, which made a line repeating A quadratic
        r"uncorrectable ECC error|(?<![^\n])(?>[^\n]*?ECC error).*uncorrectable|"
        r"CUDA_ERROR_ECC_UNCORRECTABLE|cudaErrorECCUncorrectable|double[- ]bit ECC error|"
        r"(?<![^\n])(?>[^\n]*?\bDBE\b).*error",
        GPU,
        Blame.NODE,
        action=_DRAIN + " (row remap applies at reset)",
        confidence=0.9,
        summary="uncorrectable ECC error in GPU memory",
        priority=90,
    ),
    _p(
        "remap_failure",
        # gpud's remapped-rows state reason (leptonai/gpud components/accelerator/nvidia/
        # remapped-rows/component_output.go @50b548fba4b6: "nvml GPU %s qualifies for RMA
        # (failure occurred %v, uncorrectable errors %d)"; later "%s qualifies for RMA (row
        # remapping failed, remapped due to %d uncorrectable error(s))", component_test.go
        # @0143173e7038)
        r"Remapping Failure Occurred\s*:\s*Yes|row remap(ping)? fail|"
        r"qualifies for RMA \(failure occurred true\b",
        GPU,
        Blame.NODE,
        action="drain the node and run dcgmi diag; a failed row remap usually means RMA",
        confidence=0.9,
        summary="GPU memory row remapping failed",
        priority=88,
    ),
    _p(
        "reset_required",
        r"NV_ERR_RESET_REQUIRED|NVML_ERROR_RESET_REQUIRED|GPU requires a reset|"
        r"GPU Reset Required|reset required before it can be used",
        GPU,
        Blame.NODE,
        action=_DRAIN,
        confidence=0.8,
        summary="the driver says the GPU needs a reset before it can be used again",
        priority=78,
    ),
    _p(
        "rm_init_failed",
        r"RmInitAdapter failed|rm_init_adapter failed|GPU_INIT_ERROR|"
        r"failed to initialize the NVIDIA GPU",
        GPU,
        Blame.NODE,
        action=_DRAIN + "; reboot if needed",
        confidence=0.8,
        summary="the driver could not initialise the GPU",
        priority=80,
    ),
    _p(
        "gsp",
        r"GSP.{0,40}(heartbeat|timeout|timed out|error)|Timeout waiting for RPC from GSP|"
        r"GSP_RPC_TIMEOUT",
        GPU,
        Blame.NODE,
        action=_DRAIN,
        confidence=0.8,
        summary="GPU System Processor (GSP) firmware stopped responding",
        priority=80,
    ),
    _p(
        "dcgm_diag_fail",
        r"(?<![^\n])(?>[^\n]*?dcgmi diag).*\bfail|"
        r"\|\s*(Memory|Diagnostic|PCIe|SM Stress|Targeted Stress|Targeted Power|"
        r"Memory Bandwidth|EUD|Pulse Test|Memtest|NVBandwidth|Software|Context Create|"
        r"Deployment)\s*\|\s*Fail",
        GPU,
        Blame.NODE,
        action="drain the node and replace or reset the GPU that failed the diagnostic",
        confidence=0.8,
        summary="DCGM diagnostic failed",
        priority=78,
    ),
    _p(
        "remap_pending",
        # gpud's remapped-rows state reason for a GPU whose remapping is pending (same files:
        # "nvidia-smi GPU %s needs reset (pending remapping %v)" / "nvml GPU %s ...", later
        # "%s needs reset (detected pending row remapping)", its suggested action "row
        # remapping pending requires GPU reset or system reboot")
        r"(Remapping|Pending)\s*(?:(Pending)\s*)?:\s*Yes|row remapping pending|"
        r"New row marked for remapping|"
        r"needs reset \((?:pending remapping true|detected pending row remapping)\)",
        GPU,
        Blame.NODE,
        action="reset the GPU when idle (drain first) to activate the pending row remap",
        confidence=0.6,
        summary="a GPU memory row remap is pending a GPU reset",
        priority=40,
    ),
    _p(
        "pcie_aer",
        r"(?<![^\n])(?>[^\n]*?AER:).*(Uncorrected|Fatal)|"
        r"(?<![^\n])(?>[^\n]*?PCIe Bus Error).*(Uncorrected|Fatal)",
        GPU,
        Blame.NODE,
        action="drain the node and check the GPU's PCIe slot/riser",
        confidence=0.6,
        summary="uncorrected PCIe error on the GPU's link",
        priority=65,
    ),
    _p(
        "thermal",
        r"thermal (?:violation|slowdown|shutdown) (?:detected|event|occurred)|"
        r"HW Thermal Slowdown\s*:\s*Active|"
        r"GPU over temperature|clocks.*thermal",
        GPU,
        Blame.NODE,
        action="check the node's cooling; drain if the GPU keeps throttling",
        confidence=0.5,
        summary="GPU thermal throttling or shutdown",
        priority=30,
    ),
    # --- interconnect ------------------------------------------------------------------------
    _p(
        "nvlink",
        r"NVLink.{0,60}(error|fatal|down|inactive|fail)|NVLINK_ERROR|\bSXid\b",
        NET,
        Blame.NODE,
        action="drain the node, reset the GPUs/NVSwitch fabric and resubmit",
        confidence=0.8,
        summary="NVLink/NVSwitch error inside the node",
        priority=80,
    ),
    _p(
        "ib_completion",
        r"NET/IB\w*\s*:.{0,120}(completion|error \d+|status=\d+|IBV_WC_)|"
        # IBV_WC_\w+_ERR from the first IBV_WC_ of a word: a later one in it reaches less
        r"Got completion from peer|(?<!\w)(?>\w*?(?=IBV_WC_))IBV_WC_\w+_ERR|"
        r"ibv_(poll_cq|post_send|modify_qp|reg_mr)\w*+ failed",
        NET,
        Blame.INFRA,
        action="check the InfiniBand/RoCE link and switch port of the named host; "
        "resubmit excluding it if it recurs",
        confidence=0.85,
        summary="NCCL InfiniBand/RoCE transfer failed (network fabric error)",
        priority=82,
    ),
    # NCCL before 2.19 WARNs every async event but COMM_EST as "Got async event : <text>"
    # (src/transport/net_ib.cc @f40ce73e89); rdma-core's ibv_event_type_str texts of the
    # informational events (a port coming up, SM/P_Key changes, drained queues) are no fault
    _p(
        "ib_port",
        # \d++: what the .{0,60} leads to starts with a letter, after the whole number anyway
        r"mlx5_\d++.{0,60}(link (is )?down|port.{0,20}down|error)|\bib\d\b.{0,20}link (is )?down|"
        r"Physical link down|IBV_EVENT_PORT_ERR|NET/IB\w*\s*:\s*Got async event\s*:"
        r"(?!\s*(?:port active|P_Key change|SM change|client reregistration|path migrated|"
        r"send queue drained|last WQE reached|SRQ limit reached|communication established))",
        NET,
        Blame.INFRA,
        action="check the node's InfiniBand port and cable",
        confidence=0.7,
        summary="InfiniBand port went down",
        priority=75,
    ),
    _p(
        "nccl_socket",
        r"NET/Socket.{0,80}(Connection (reset|refused|closed)|Broken pipe|error)|"
        r"Connection closed by remote peer|remote process exited or there was a network error|"
        r"ncclRemoteError",
        NET,
        Blame.UNKNOWN,
        action=(
            "look at the peer rank's own log: a remote error is usually a symptom of that rank "
            "dying"
        ),
        confidence=0.4,
        summary="a NCCL peer connection broke",
        root_cause=False,
        priority=20,
        culprit="none",  # the host that prints a peer's failure is not the culprit
    ),
    _p(
        "nccl_system_error",
        r"unhandled system error|ncclSystemError|"
        # a CHECK_EQ on an ncclResult_t prints only its number (emitters/nccl.json, round ten)
        r"ncclSuccess\)? \(2 vs\. 0\)|ncclSuccess\)? == \S{1,60} \(0 vs\. 2\)",
        NET,
        Blame.UNKNOWN,
        action=(
            "rerun with NCCL_DEBUG=INFO to see the failing call (network interface, /dev/shm "
            "size, IB)"
        ),
        confidence=0.45,
        summary="NCCL hit a system/network error",
        priority=35,
        culprit="none",
    ),
)
