"""Domain types of the timeline: what sources produce and what the store keeps.

Times are UNIX epoch seconds (float, UTC) everywhere: cheap to compare, index and send. Every
field's type and bounds come from timeline.bounds (the boundary contract).
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from timeline import bounds as b


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

    uuid: b.Id96
    node: b.Id255
    index: b.Count32 | None = None
    pci_bus_id: b.Name32 | None = None
    name: b.Name128 | None = None
    serial: b.Name64 | None = None
    memory_total_mb: b.MegaBytes | None = None
    mig_mode: bool | None = None
    driver_version: b.Name32 | None = None


class Sample(BaseModel):
    """One wide telemetry row: one GPU at one instant. Fields a source cannot read stay None."""

    model_config = ConfigDict(extra="forbid")

    ts: b.ObservedAt
    gpu_uuid: b.Id96
    util_gpu: b.Percent | None = None
    util_mem: b.Percent | None = None
    mem_used_mb: b.MegaBytes | None = None
    mem_total_mb: b.MegaBytes | None = None
    power_w: b.Watts | None = None
    temp_gpu: b.Celsius | None = None
    temp_mem: b.Celsius | None = None  # HBM
    sm_clock_mhz: b.MegaHertz | None = None
    clock_event_reasons: b.Count64 | None = None  # NVML clocksEventReasons bitmask
    ecc_sbe_volatile: b.Count64 | None = None
    ecc_dbe_volatile: b.Count64 | None = None
    ecc_sbe_aggregate: b.Count64 | None = None
    ecc_dbe_aggregate: b.Count64 | None = None
    remapped_correctable: b.Count32 | None = None
    remapped_uncorrectable: b.Count32 | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    retired_pages_sbe: b.Count32 | None = None
    retired_pages_dbe: b.Count32 | None = None
    pcie_replay: b.Count64 | None = None
    nvlink_crc_errors: b.Count64 | None = None
    nvlink_replay_errors: b.Count64 | None = None
    nvlink_recovery_errors: b.Count64 | None = None
    energy_mj: b.MilliJoules | None = None
    # e.g. DCGM profiling fields (sm_active, tensor_active)
    extra: dict[b.ExtraKey, b.ExtraValue] | None = Field(default=None, max_length=b.EXTRA_MAX_KEYS)


class SampleRow(NamedTuple):
    """A validated sample as a light row: Sample's fields by name, without a model's cost.

    The ingest hands a batch's samples to the SampleStore as these (a model per sample cost
    more than storing it, profiled); absent fields are None.
    """

    ts: float
    gpu_uuid: str
    util_gpu: float | None = None
    util_mem: float | None = None
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None
    power_w: float | None = None
    temp_gpu: float | None = None
    temp_mem: float | None = None
    sm_clock_mhz: float | None = None
    clock_event_reasons: int | None = None
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
    extra: dict[str, float] | None = None

    @classmethod
    def of(cls, sample: Sample) -> SampleRow:
        """The row of a validated Sample model."""
        d: dict[str, Any] = sample.__dict__
        return cls._make(d[f] for f in cls._fields)


class Event(BaseModel):
    """Something that happened at one instant, as one source saw it."""

    model_config = ConfigDict(extra="forbid")

    ts: b.ObservedAt
    node: b.Name255 | None = None
    source: b.Id32  # nvml, kmsg, dcgm, joblog, slurm, ...
    kind: EventKind
    gpu_uuid: b.Name96 | None = None
    pci_bus_id: b.Name32 | None = None
    job_id: b.Name128 | None = None
    code: b.Int32 | None = None
    severity: Severity = Severity.INFO
    message: b.MessageText = ""  # cut with a marker past its cap, never refused for length
    raw: b.RawText | None = None  # the verbatim line(s): evidence
    payload: b.Payload = Field(default_factory=dict)
    count: b.Count32 = Field(default=1, ge=1)  # a flood of identical lines: one event, a count
    # Sources that may see one fact twice (re-polls, restarts) set a stable key; the store keeps
    # the first event per (source, dedup_key).
    dedup_key: b.Name255 | None = None


class Job(BaseModel):
    """A scheduler job (Slurm job or Kubernetes pod/workload) as last observed."""

    model_config = ConfigDict(extra="forbid")

    scheduler: Scheduler
    job_id: b.Id128  # Slurm job id, or namespace/pod
    cluster: b.Name64 = "default"
    name: b.Text255 | None = None
    user: b.Name128 | None = None
    account: b.Name128 | None = None  # Slurm account or K8s namespace
    partition: b.Name128 | None = None
    state: b.Name32 = "UNKNOWN"  # scheduler's own state word
    reason: b.Text255 | None = None
    submit_ts: b.Timestamp | None = None
    start_ts: b.Timestamp | None = None
    end_ts: b.Timestamp | None = None
    exit_code: b.Int32 | None = None
    signal: b.Int32 | None = None
    nodes: list[b.Id255] = Field(default_factory=list, max_length=b.JOB_MAX_NODES)
    gpus: b.Count32 | None = None  # GPUs requested/allocated in total
    checkpoint_dir: b.Name1024 | None = None
    wandb_run: b.Name255 | None = None  # entity/project/run_id
    requeue_of: b.Name128 | None = None  # job id this one requeues
    restart_count: b.Count32 = 0
    payload: b.JobPayload = Field(default_factory=dict)


class JobPatch(BaseModel):
    """Facts about a job learned outside its scheduler (W&B run, checkpoint dir).

    Only the fields set here change; a patch for a job not stored yet changes nothing.
    """

    model_config = ConfigDict(extra="forbid")

    job_id: b.Id128
    scheduler: Scheduler | None = None  # None: whichever scheduler has this job id
    wandb_run: b.Name255 | None = None
    checkpoint_dir: b.Name1024 | None = None


class Allocation(BaseModel):
    """A job held a GPU (or a whole node when gpu_index is None) from start_ts to end_ts."""

    model_config = ConfigDict(extra="forbid")

    scheduler: Scheduler
    job_id: b.Id128
    node: b.Id255
    gpu_index: b.Count32 | None = None
    gpu_uuid: b.Name96 | None = None
    start_ts: b.Timestamp
    end_ts: b.Timestamp | None = None  # None while the job runs


class Node(BaseModel):
    """A host as the scheduler and agents see it."""

    model_config = ConfigDict(extra="forbid")

    name: b.Id255
    scheduler: Scheduler | None = None
    cluster: b.Name64 = "default"
    state: b.Name64 | None = None  # IDLE, MIXED, DRAINED, Ready, ...
    reason: b.Text1024 | None = None
    reason_user: b.Name128 | None = None  # who drained it
    reason_ts: b.Timestamp | None = None
    unschedulable: bool | None = None
    gpu_count: b.Count32 | None = None
    gpu_allocatable: b.Count32 | None = None
    labels: b.Labels = Field(default_factory=dict)
    taints: b.Taints = Field(default_factory=list)
    updated_ts: b.Timestamp | None = None


# The item lists of a batch, in the order of the ingest body; each counts toward the item limit.
ITEM_KINDS = ("gpus", "samples", "events", "jobs", "allocations", "nodes", "job_patches")


class Batch(BaseModel):
    """The unit of ingest: its valid items are stored together, once per batch_id."""

    model_config = ConfigDict(extra="forbid")

    agent: b.Id255
    node: b.Id255
    batch_id: Annotated[str, b.name(64, min_length=8)]
    gpus: list[GpuInfo] = Field(default_factory=list)
    samples: list[Sample] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    jobs: list[Job] = Field(default_factory=list)
    allocations: list[Allocation] = Field(default_factory=list)
    nodes: list[Node] = Field(default_factory=list)
    job_patches: list[JobPatch] = Field(default_factory=list)

    def size(self) -> int:
        """Items of every kind together (what max_batch_items limits)."""
        return sum(len(getattr(self, kind)) for kind in ITEM_KINDS)


class FieldError(BaseModel):
    """One violation of the contract: the field (dotted path) and what is wrong with it."""

    field: str
    error: str


class RejectedItem(BaseModel):
    """An item of a batch the server did not store, and why; the rest of the batch was stored."""

    kind: str  # one of ITEM_KINDS
    index: int  # position in that kind's list
    status: int  # 422: breaks the contract; 403: names a node this agent token may not write
    errors: list[FieldError]


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
    job_patches: int = 0
    rejected: list[RejectedItem] = Field(default_factory=list)
