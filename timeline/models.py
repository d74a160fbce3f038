"""Domain types of the timeline: what sources produce and what the store keeps.

Times are UNIX epoch seconds (float, UTC) everywhere: cheap to compare, index and send.
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Severity(enum.StrEnum):
    """How bad an event is on its own, before correlation."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


class Scheduler(enum.StrEnum):
    """Which workload manager a job or node belongs to."""

    SLURM = "slurm"
    KUBERNETES = "kubernetes"


class EventKind(enum.StrEnum):
    """The vocabulary of event kinds; sources pick one, the correlator interprets it."""

    XID = "xid"  # NVIDIA Xid from the kernel log, NVML or DCGM; code = Xid number
    SXID = "sxid"  # NVSwitch SXid; code = SXid number
    GPU_LOST = "gpu_lost"  # NVML GpuIsLost / Unknown Error, "fallen off the bus" without Xid
    ECC = "ecc"  # ECC counters moved (payload says sbe/dbe, volatile/aggregate)
    ROW_REMAP = "row_remap"  # remap pending / failure
    PCIE_AER = "pcie_aer"  # PCIe AER error on a GPU or its root port
    NVLINK = "nvlink"  # NVLink CRC/replay/recovery errors or link down
    GSP = "gsp"  # GSP heartbeat timeout / RPC failure, RmInitAdapter failed
    THERMAL = "thermal"  # thermal or power slowdown/shutdown
    NCCL_TIMEOUT = "nccl_timeout"  # watchdog timeout; payload: op_type, seq_num, timeout_ms, rank
    NCCL_ERROR = "nccl_error"  # NCCL WARN / error lines (NET/IB, socket, remote error)
    CUDA_ERROR = "cuda_error"  # illegal memory access, launch failure, device assert, ECC
    CUDA_OOM = "cuda_oom"  # CUDA out of memory
    HOST_OOM = "host_oom"  # kernel oom-killer, cgroup OOM, OOMKilled
    CHILD_FAILED = "child_failed"  # torch.distributed.elastic ChildFailedError
    JOB_STATE = "job_state"  # scheduler says a job changed state; code = exit code
    NODE_STATE = "node_state"  # scheduler says a node changed state (drain, down, NotReady)
    POD_EVENT = "pod_event"  # a Kubernetes Event (reason in payload)
    PROGRESS_STALLED = "progress_stalled"  # W&B: a running job logged no step for N minutes
    PROGRESS = "progress"  # W&B: last step seen
    AGENT = "agent"  # the agent's own health: source errors, spool pressure
    OTHER = "other"


class GpuInfo(BaseModel):
    """Identity of one GPU as NVML (or DCGM) reports it."""

    model_config = ConfigDict(extra="forbid")

    uuid: str = Field(min_length=1, max_length=96)
    node: str = Field(min_length=1, max_length=255)
    index: int | None = None
    pci_bus_id: str | None = Field(default=None, max_length=32)
    name: str | None = Field(default=None, max_length=128)
    serial: str | None = Field(default=None, max_length=64)
    memory_total_mb: float | None = None
    mig_mode: bool | None = None
    driver_version: str | None = Field(default=None, max_length=32)


class Sample(BaseModel):
    """One wide telemetry row: one GPU at one instant. Fields a source cannot read stay None."""

    model_config = ConfigDict(extra="forbid")

    ts: float
    gpu_uuid: str = Field(min_length=1, max_length=96)
    util_gpu: float | None = None  # percent
    util_mem: float | None = None  # percent
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None
    power_w: float | None = None
    temp_gpu: float | None = None  # Celsius
    temp_mem: float | None = None  # Celsius (HBM)
    sm_clock_mhz: float | None = None
    clock_event_reasons: int | None = None  # NVML clocksEventReasons bitmask
    ecc_sbe_volatile: int | None = None
    ecc_dbe_volatile: int | None = None
    ecc_sbe_aggregate: int | None = None
    ecc_dbe_aggregate: int | None = None
    remapped_correctable: int | None = None
    remapped_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    pcie_replay: int | None = None
    nvlink_crc_errors: int | None = None
    nvlink_replay_errors: int | None = None
    nvlink_recovery_errors: int | None = None
    energy_mj: float | None = None
    extra: dict[str, float] | None = None  # e.g. DCGM profiling fields (sm_active, tensor_active)


class Event(BaseModel):
    """Something that happened at one instant, as one source saw it."""

    model_config = ConfigDict(extra="forbid")

    ts: float
    node: str | None = Field(default=None, max_length=255)
    source: str = Field(min_length=1, max_length=32)  # nvml, kmsg, dcgm, joblog, slurm, ...
    kind: EventKind
    gpu_uuid: str | None = Field(default=None, max_length=96)
    pci_bus_id: str | None = Field(default=None, max_length=32)
    job_id: str | None = Field(default=None, max_length=128)
    code: int | None = None
    severity: Severity = Severity.INFO
    message: str = Field(default="", max_length=4096)
    raw: str | None = Field(default=None, max_length=16384)  # the verbatim line(s): evidence
    payload: dict[str, Any] = Field(default_factory=dict)
    count: int = Field(default=1, ge=1)  # a flood of identical lines is one event with a count
    # Sources that may see one fact twice (re-polls, restarts) set a stable key; the store keeps
    # the first event per (source, dedup_key).
    dedup_key: str | None = Field(default=None, max_length=255)


class Job(BaseModel):
    """A scheduler job (Slurm job or Kubernetes pod/workload) as last observed."""

    model_config = ConfigDict(extra="forbid")

    scheduler: Scheduler
    job_id: str = Field(min_length=1, max_length=128)  # Slurm job id, or namespace/pod
    cluster: str = Field(default="default", max_length=64)
    name: str | None = Field(default=None, max_length=255)
    user: str | None = Field(default=None, max_length=128)
    account: str | None = Field(default=None, max_length=128)  # Slurm account or K8s namespace
    partition: str | None = Field(default=None, max_length=128)
    state: str = Field(default="UNKNOWN", max_length=32)  # scheduler's own state word
    reason: str | None = Field(default=None, max_length=255)
    submit_ts: float | None = None
    start_ts: float | None = None
    end_ts: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    nodes: list[str] = Field(default_factory=list)
    gpus: int | None = None  # GPUs requested/allocated in total
    checkpoint_dir: str | None = Field(default=None, max_length=1024)
    wandb_run: str | None = Field(default=None, max_length=255)  # entity/project/run_id
    requeue_of: str | None = Field(default=None, max_length=128)  # job id this one requeues
    restart_count: int = 0
    payload: dict[str, Any] = Field(default_factory=dict)


class JobPatch(BaseModel):
    """Facts about a job learned outside its scheduler (W&B run, checkpoint dir).

    Only the fields set here change; a patch for a job not stored yet changes nothing.
    """

    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(min_length=1, max_length=128)
    scheduler: Scheduler | None = None  # None: whichever scheduler has this job id
    wandb_run: str | None = Field(default=None, max_length=255)
    checkpoint_dir: str | None = Field(default=None, max_length=1024)


class Allocation(BaseModel):
    """A job held a GPU (or a whole node when gpu_index is None) from start_ts to end_ts."""

    model_config = ConfigDict(extra="forbid")

    scheduler: Scheduler
    job_id: str = Field(min_length=1, max_length=128)
    node: str = Field(min_length=1, max_length=255)
    gpu_index: int | None = None
    gpu_uuid: str | None = Field(default=None, max_length=96)
    start_ts: float
    end_ts: float | None = None  # None while the job runs


class Node(BaseModel):
    """A host as the scheduler and agents see it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=255)
    scheduler: Scheduler | None = None
    cluster: str = Field(default="default", max_length=64)
    state: str | None = Field(default=None, max_length=64)  # IDLE, MIXED, DRAINED, Ready, ...
    reason: str | None = Field(default=None, max_length=1024)
    reason_user: str | None = Field(default=None, max_length=128)  # who drained it
    reason_ts: float | None = None
    unschedulable: bool | None = None
    gpu_count: int | None = None
    gpu_allocatable: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, Any]] = Field(default_factory=list)
    updated_ts: float | None = None


class Batch(BaseModel):
    """The unit of ingest: stored whole or not at all, once per batch_id."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, max_length=255)
    node: str = Field(min_length=1, max_length=255)
    batch_id: str = Field(min_length=8, max_length=64)
    gpus: list[GpuInfo] = Field(default_factory=list)
    samples: list[Sample] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    jobs: list[Job] = Field(default_factory=list)
    allocations: list[Allocation] = Field(default_factory=list)
    nodes: list[Node] = Field(default_factory=list)
    job_patches: list[JobPatch] = Field(default_factory=list)


class AppendResult(BaseModel):
    """What the store did with a batch."""

    batch_id: str
    duplicate: bool
    samples: int = 0
    events: int = 0
    gpus: int = 0
    jobs: int = 0
    allocations: int = 0
    nodes: int = 0
