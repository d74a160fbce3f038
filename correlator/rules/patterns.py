"""Log-pattern rules as data: which text means which failure, most specific first."""

from __future__ import annotations

import re
from dataclasses import dataclass

from correlator.taxonomy import Blame, Category, Verdict
from timeline.models import EventKind as K

GPU = Category.GPU_HARDWARE
NET = Category.INTERCONNECT
NODE = Category.NODE
USER = Category.USER_CODE
HOOM = Category.OOM_HOST
GOOM = Category.OOM_GPU
SCHED = Category.SCHEDULER
NCCL = Category.NCCL_TIMEOUT_UNKNOWN


@dataclass(frozen=True)
class PatternRule:
    """One text pattern and the verdict it gives; `kinds` limits it to some event kinds."""

    name: str
    regex: re.Pattern[str]
    category: Category | None
    blame: Blame
    action: str
    confidence: float
    summary: str
    root_cause: bool = True
    priority: int = 0
    kinds: frozenset[K] | None = None  # None: any kind of event

    def verdict(self) -> Verdict:
        """The verdict this rule gives when it matches."""
        return Verdict(
            category=self.category,
            blame=self.blame,
            action=self.action,
            confidence=self.confidence,
            summary=self.summary,
            root_cause=self.root_cause,
            priority=self.priority,
        )


def _r(pattern: str, flags: int = re.I) -> re.Pattern[str]:
    return re.compile(pattern, flags)


def _p(
    name: str, pattern: str | re.Pattern[str], cat: Category | None, blame: Blame, **kw: object
) -> PatternRule:
    regex = pattern if isinstance(pattern, re.Pattern) else _r(pattern)
    return PatternRule(name=name, regex=regex, category=cat, blame=blame, **kw)  # type: ignore[arg-type]


_DRAIN = "drain the node, reset the GPU and resubmit the job"
_FIX = "fix the program and resubmit"
_STATES = frozenset({K.JOB_STATE, K.POD_EVENT, K.NODE_STATE})

# Order matters: the first rule whose regex matches an event's text wins.
PATTERNS: tuple[PatternRule, ...] = (
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
        r"(GPU|gpu)\s*\S*:\s*Unknown Error|cudaErrorDevicesUnavailable.*lost",
        GPU,
        Blame.NODE,
        action=_DRAIN + "; reboot if reset fails",
        confidence=0.9,
        summary="the driver lost the GPU (nvidia-smi cannot get its handle)",
        priority=95,
    ),
    _p(
        "uncorrectable_ecc",
        r"uncorrectable ECC error|ECC error.*uncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE|"
        r"cudaErrorECCUncorrectable|double[- ]bit ECC error|\bDBE\b.*error",
        GPU,
        Blame.NODE,
        action=_DRAIN + " (row remap applies at reset)",
        confidence=0.9,
        summary="uncorrectable ECC error in GPU memory",
        priority=90,
    ),
    _p(
        "remap_failure",
        r"Remapping Failure Occurred\s*:\s*Yes|row remap(ping)? fail",
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
        r"dcgmi diag.*\bfail|\|\s*(Memory|Diagnostic|PCIe|SM Stress|Targeted Stress|Targeted Power|"
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
        r"(Remapping|Pending)\s*(Pending)?\s*:\s*Yes|row remapping pending|"
        r"New row marked for remapping",
        GPU,
        Blame.NODE,
        action="reset the GPU when idle (drain first) to activate the pending row remap",
        confidence=0.6,
        summary="a GPU memory row remap is pending a GPU reset",
        priority=40,
    ),
    _p(
        "pcie_aer",
        r"AER:.*(Uncorrected|Fatal)|PCIe Bus Error.*(Uncorrected|Fatal)",
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
        r"Got completion from peer|IBV_WC_\w+_ERR|ibv_(poll_cq|post_send|modify_qp|"
        r"reg_mr)\w* failed",
        NET,
        Blame.INFRA,
        action="check the InfiniBand/RoCE link and switch port of the named host; "
        "resubmit excluding it if it recurs",
        confidence=0.85,
        summary="NCCL InfiniBand/RoCE transfer failed (network fabric error)",
        priority=82,
    ),
    _p(
        "ib_port",
        r"mlx5_\d+.{0,60}(link (is )?down|port.{0,20}down|error)|\bib\d\b.{0,20}link (is )?down|"
        r"Physical link down|NET/IB\w*\s*:\s*Got async event|IBV_EVENT_PORT_ERR",
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
    ),
    _p(
        "nccl_system_error",
        r"unhandled system error|ncclSystemError",
        NET,
        Blame.UNKNOWN,
        action=(
            "rerun with NCCL_DEBUG=INFO to see the failing call (network interface, /dev/shm "
            "size, IB)"
        ),
        confidence=0.45,
        summary="NCCL hit a system/network error",
        priority=35,
    ),
    # --- GPU OOM before generic CUDA errors ----------------------------------------------------
    _p(
        "cuda_oom",
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY|"
        r"cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED: Out of memory|"
        r"Out of memory while trying to allocate|"
        r"failed to allocate .{0,40}(on device|from device|GPU)|CUBLAS_STATUS_ALLOC_FAILED|"
        r"Cuda failure 'out of memory'|HIP out of memory",
        GOOM,
        Blame.JOB,
        action=(
            "reduce the batch size or model shard per GPU (or enable activation checkpointing) "
            "and resubmit"
        ),
        confidence=0.9,
        summary="the job ran out of GPU memory",
        priority=55,
    ),
    # --- user code ---------------------------------------------------------------------------
    _p(
        "device_assert",
        r"device-side assert|cudaErrorAssert|CUDA_ERROR_ASSERT|Assertion `[^`]*`\s*failed",
        USER,
        Blame.JOB,
        action=_FIX + " (an index or value check failed in a GPU kernel; "
        "rerun with CUDA_LAUNCH_BLOCKING=1)",
        confidence=0.85,
        summary="a device-side assertion failed in the program",
        priority=55,
    ),
    _p(
        "illegal_access",
        r"illegal memory access|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS|"
        r"misaligned address|illegal instruction|CUDA_ERROR_ILLEGAL_INSTRUCTION",
        USER,
        Blame.JOB,
        action=_FIX + " (run it under compute-sanitizer)",
        confidence=0.75,
        summary="the program made an illegal memory access on the GPU",
        priority=50,
    ),
    _p(
        "launch_failure",
        r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|cudaErrorLaunchFailure|"
        r"too many resources requested for launch|invalid configuration argument|"
        r"no kernel image is available|invalid device function|CUDNN_STATUS_(EXECUTION_FAILED|"
        r"NOT_SUPPORTED|BAD_PARAM)|"
        r"CUBLAS_STATUS_(EXECUTION_FAILED|NOT_SUPPORTED|INVALID_VALUE)",
        USER,
        Blame.JOB,
        action=_FIX + " (check the kernel launch and the CUDA/driver build)",
        confidence=0.6,
        summary="a CUDA kernel launch failed",
        priority=45,
    ),
    # --- host OOM ----------------------------------------------------------------------------
    _p(
        "host_oom",
        r"oom[-_ ]kill|Out of memory: Kill|invoked oom-killer|Memory cgroup out of memory|"
        r"OOMKilled|"
        r"OUT_OF_MEMORY|exceeded (its |the )?memory limit|low on resource: memory|"
        r"The node was low on resource|"
        r"\bMemoryError\b|Cannot allocate memory|can't allocate memory|std::bad_alloc",
        HOOM,
        Blame.JOB,
        action=(
            "request more host memory for the job (or reduce dataloader workers/prefetch) and "
            "resubmit"
        ),
        confidence=0.85,
        summary="the job ran out of host memory and was killed",
        priority=60,
    ),
    # --- node --------------------------------------------------------------------------------
    _p(
        "kill_task_failed",
        r"Kill task failed|DUE TO JOB NOT ENDING WITH SIGNALS",
        NODE,
        Blame.NODE,
        action=(
            "the node could not kill the job's processes (often stuck in the GPU driver): "
            "drain and reboot it"
        ),
        confidence=0.85,
        summary="Slurm could not kill the job's tasks on the node",
        priority=85,
    ),
    _p(
        "node_fail",
        r"\bNODE_FAIL\b|DUE TO NODE FAIL|node fail(ure|ed)|\bNot responding\b|NodeNotReady|"
        r"\bNotReady\b|unexpectedly rebooted|Node unexpectedly rebooted|Kernel panic|kernel BUG at|"
        r"hard LOCKUP|soft lockup|NodeHasDiskPressure|Unable to contact slurm controller|"
        r"Node is shutting down|node was shut ?down|Kubelet stopped posting node status|"
        r"NodeStatusUnknown|node\.kubernetes\.io/unreachable|\bNOT_RESPONDING\b|\bBOOT_FAIL\b",
        NODE,
        Blame.NODE,
        action="drain the node, check its kernel log and hardware, and resubmit the job elsewhere",
        confidence=0.85,
        summary="the node failed or stopped responding",
        priority=85,
    ),
    _p(
        "node_io",
        r"No space left on device|Read-only file system|Stale file handle|"
        r"blocked for more than \d+ seconds",
        NODE,
        Blame.NODE,
        action="check the node's disks and file systems; drain it if they are failing",
        confidence=0.5,
        summary="the node's storage or kernel misbehaved",
        priority=40,
    ),
    # --- scheduler ---------------------------------------------------------------------------
    _p(
        "time_limit",
        r"DUE TO TIME LIMIT|\bState=TIMEOUT\b|\bTIMEOUT\b|DeadlineExceeded|"
        r"Job was active longer than specified deadline",
        SCHED,
        Blame.JOB,
        action="resubmit from the last checkpoint with a longer time limit",
        confidence=0.9,
        summary="the job hit its time limit",
        priority=30,
        kinds=_STATES,
    ),
    _p(
        "time_limit_text",
        r"DUE TO TIME LIMIT|Job was active longer than specified deadline",
        SCHED,
        Blame.JOB,
        action="resubmit from the last checkpoint with a longer time limit",
        confidence=0.9,
        summary="the job hit its time limit",
        priority=30,
    ),
    _p(
        "preempted",
        r"DUE TO PREEMPTION|\bPREEMPTED\b|Preempted|preempting|PreemptionByScheduler",
        SCHED,
        Blame.INFRA,
        action="requeue the job from its last checkpoint",
        confidence=0.85,
        summary="the scheduler preempted the job",
        priority=30,
    ),
    _p(
        "unschedulable",
        r"FailedScheduling|PodUnschedulable|\bUnschedulable\b(?!:\s*(?:false|true))|"
        r"Insufficient nvidia\.com/gpu|"
        r"didn't match Pod's node affinity|had untolerated taint|"
        r"Requested node configuration is not available",
        SCHED,
        Blame.INFRA,
        action="free or add GPU capacity, or fix the job's resource request/node selector",
        confidence=0.75,
        summary="the scheduler could not place the job",
        priority=25,
    ),
    _p(
        "cancelled",
        r"\bCANCELLED\b|\bCANCELED\b",
        SCHED,
        Blame.JOB,
        action="nothing to repair: the job was cancelled by its owner or an administrator",
        confidence=0.6,
        summary="the job was cancelled",
        priority=15,
    ),
    _p(
        "job_failed_state",
        r"\bState=FAILED\b",
        USER,
        Blame.JOB,
        action="read the job's own output: it exited non-zero and the scheduler saw no other cause",
        confidence=0.35,
        summary="the job exited with a non-zero code",
        priority=12,
        kinds=_STATES,
    ),
    # --- NCCL hangs (consequences) -----------------------------------------------------------
    _p(
        "nccl_watchdog",
        r"Watchdog caught collective operation timeout|collective operation timeout|"
        r"ProcessGroupNCCL.{0,80}(timeout|timed out)|Some NCCL operations have failed or timed out|"
        r"NCCL watchdog|NCCL communicator was aborted|ncclCommWatchdog|Timeout at NCCL work",
        NCCL,
        Blame.UNKNOWN,
        action="find the rank that stopped first (hardware/network events on its node, "
        "lagging SeqNum); resubmit from checkpoint",
        confidence=0.5,
        summary="a NCCL collective timed out (symptom; root cause not shown)",
        root_cause=False,
        priority=10,
    ),
    # --- generic application errors (weakest) ------------------------------------------------
    _p(
        "python_error",
        _r(
            r"^\s*(\w+\.)*(RuntimeError|ValueError|KeyError|TypeError|AssertionError|IndexError|"
            r"AttributeError|NameError|ModuleNotFoundError|ImportError|FileNotFoundError|"
            r"ZeroDivisionError|"
            r"NotImplementedError|SyntaxError|PermissionError)\b",
            re.I | re.M,
        ),
        USER,
        Blame.JOB,
        action=_FIX,
        confidence=0.45,
        summary="the program raised an exception",
        priority=20,
    ),
    _p(
        "segfault",
        r"Segmentation fault|SIGSEGV|core dumped",
        USER,
        Blame.JOB,
        action=_FIX + " (if it recurs only on one node, suspect the node)",
        confidence=0.4,
        summary="the program crashed with a segmentation fault",
        priority=20,
    ),
)
