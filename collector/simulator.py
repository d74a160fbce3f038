"""A simulated fleet for the demo and the benchmarks: it speaks the same ingest API as agents.

Telemetry is resampled from a real H100 trace (idle, compute, spin-wait, held-idle phases); fault
lines use the real formats of the kernel log, NCCL's watchdog and PyTorch. It never stands in for a
real source in a test of that source.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from collector.parse.joblog import parse_job_line
from collector.parse.kernel import parse_kernel_line
from timeline.models import (
    Allocation,
    Batch,
    Event,
    GpuInfo,
    Job,
    Sample,
    Scheduler,
)

TRACE = Path(__file__).resolve().parent / "data" / "h100_trace_spin_vs_compute.jsonl"
GPU_NAME = "NVIDIA H100 80GB HBM3"
MEM_TOTAL_MB = 81559.0
USERS = (("alice", "llm-pretrain"), ("bob", "vision"), ("carol", "llm-pretrain"), ("dave", "rl"))

# Phase a GPU is in -> the trace phase its telemetry is drawn from.
PHASES = {"idle": "idle", "compute": "matmul", "hang": "spin_all_sms", "held": "held_idle"}


def load_profiles(path: Path = TRACE) -> dict[str, list[dict[str, float]]]:
    """The real trace's rows grouped by phase."""
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    with path.open() as fh:
        for line in fh:
            row = json.loads(line)
            rows[row["phase"]].append(row)
    return dict(rows)


@dataclass
class SimGpu:
    """One simulated GPU."""

    node: str
    index: int
    uuid: str
    pci_bus_id: str
    phase: str = "idle"
    job_id: str | None = None


@dataclass
class SimJob:
    """One simulated Slurm job."""

    job_id: str
    user: str
    account: str
    nodes: list[str]
    gpus_per_node: int
    start_ts: float
    state: str = "RUNNING"
    end_ts: float | None = None
    exit_code: int | None = None
    phase: str = "compute"
    held: list[tuple[str, int]] = field(default_factory=list)  # (node, gpu index)


@dataclass
class DemoFleet:
    """A fleet of nodes x GPUs with jobs, idle allocations, a hang and injected faults."""

    nodes: int = 16
    gpus_per_node: int = 8
    seed: int = 7
    profiles: dict[str, list[dict[str, float]]] = field(default_factory=load_profiles)
    gpus: list[SimGpu] = field(default_factory=list)
    jobs: dict[str, SimJob] = field(default_factory=dict)
    pending_events: dict[str, list[Event]] = field(default_factory=lambda: defaultdict(list))
    _rng: random.Random = field(init=False)
    _next_job: int = 1000

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        for n in range(self.nodes):
            node = self.node_name(n)
            for i in range(self.gpus_per_node):
                gpu_uuid = str(uuid.UUID(int=self._rng.getrandbits(128)))
                pci = f"00000000:{0x18 + 0x10 * i:02X}:00.0"
                self.gpus.append(SimGpu(node, i, f"GPU-{gpu_uuid}", pci))

    @staticmethod
    def node_name(n: int) -> str:
        """The name of node number n."""
        return f"gpu-node-{n + 1:02d}"

    def gpus_of(self, node: str) -> list[SimGpu]:
        """The GPUs of one node."""
        return [g for g in self.gpus if g.node == node]

    def start(self, now: float, *, faults: bool = True) -> None:
        """Place the opening workload: busy jobs, idle allocations, a hang and a few faults."""
        names = [self.node_name(n) for n in range(self.nodes)]
        for i in range(0, len(names) - 1, 4):  # two-node training jobs on every 4th pair
            self.submit(names[i : i + 2], self.gpus_per_node, now - 3600, phase="compute")
        for i, node in enumerate(names):
            if any(g.job_id for g in self.gpus_of(node)):
                continue
            if i % 4 == 2:
                self.submit([node], 4, now - 1800, phase="held")  # allocated but idle
            elif i % 4 == 3 and i % 8 == 3:
                self.submit([node], 2, now - 900, phase="compute")
        hang = self.submit(names[-2:], self.gpus_per_node, now - 1200, phase="compute")
        self.set_phase(hang, "hang")
        if faults:
            self.inject_xid79(now - 700)
            self.inject_user_fault(now - 300)

    def backfill(self, *, start: float, now: float, step_s: float) -> Iterator[Batch]:
        """History from `start` to `now`, one round every `step_s`, faults near `now`.

        The demo and tests use it so the idle view, trends and heatmap have data at once.
        """
        self.start(start, faults=False)
        ts, first = start, True
        xid_at: float | None = now - 700
        user_at: float | None = now - 300
        while ts <= now:
            if xid_at is not None and ts >= xid_at:
                self.inject_xid79(ts)
                xid_at = None
            if user_at is not None and ts >= user_at:
                self.inject_user_fault(ts)
                user_at = None
            yield from self.tick(ts, first=first, churn=False)
            first, ts = False, ts + step_s

    def submit(self, nodes: list[str], gpus_per_node: int, start_ts: float, phase: str) -> SimJob:
        """Start a job on `nodes`, taking the first free GPUs of each."""
        user, account = USERS[self._next_job % len(USERS)]
        job = SimJob(str(self._next_job), user, account, nodes, gpus_per_node, start_ts)
        self._next_job += 1
        self.jobs[job.job_id] = job
        for node in nodes:
            free = [g for g in self.gpus_of(node) if g.job_id is None][:gpus_per_node]
            for g in free:
                g.job_id = job.job_id
                job.held.append((node, g.index))
        self.set_phase(job, phase)
        return job

    def set_phase(self, job: SimJob, phase: str) -> None:
        """Put every GPU of a job into a phase (compute, hang, held)."""
        job.phase = phase
        for g in self.gpus:
            if g.job_id == job.job_id:
                g.phase = phase

    def end(self, job: SimJob, now: float, state: str, exit_code: int) -> None:
        """End a job and free its GPUs."""
        job.state, job.end_ts, job.exit_code = state, now, exit_code
        for g in self.gpus:
            if g.job_id == job.job_id:
                g.job_id, g.phase = None, "idle"

    def _multi_node_job(self) -> SimJob | None:
        running = [j for j in self.jobs.values() if j.state == "RUNNING" and len(j.nodes) > 1]
        running = [j for j in running if j.phase == "compute"]
        return running[0] if running else None

    def inject_xid79(self, ts: float) -> None:
        """A GPU falls off the bus under a two-node job; the other ranks time out in NCCL."""
        job = self._multi_node_job()
        if job is None:
            return
        bad = self.gpus_of(job.nodes[0])[3]
        bus = bad.pci_bus_id[4:-2].lower()
        raw = f"NVRM: Xid (PCI:{bus}): 79, pid=48213, name=python, GPU has fallen off the bus."
        self.pending_events[bad.node].append(_kernel_event(raw, node=bad.node, ts=ts))
        for rank, node in enumerate(job.nodes):
            line = (
                f"[rank{8 * rank + 1}]:[E ProcessGroupNCCL.cpp:616] [Rank {8 * rank + 1}] Watchdog "
                "caught collective operation timeout: WorkNCCL(SeqNum=218764, OpType=ALLREDUCE, "
                "NumelIn=67108864, NumelOut=67108864, Timeout(ms)=600000) ran for 600012 "
                "milliseconds before timing out."
            )
            self.pending_events[node].append(
                _job_event(line, node=node, job_id=job.job_id, ts=ts + 600)
            )
        bad.phase = "idle"
        self.end(job, ts + 601, "FAILED", 1)

    def inject_user_fault(self, ts: float) -> None:
        """An illegal memory access in a user's program: Xid 31 plus the CUDA error."""
        singles = [j for j in self.jobs.values() if j.state == "RUNNING" and len(j.nodes) == 1]
        singles = [j for j in singles if j.phase == "compute"]
        if not singles:
            return
        job = singles[0]
        gpu = next(g for g in self.gpus_of(job.nodes[0]) if g.job_id == job.job_id)
        bus = gpu.pci_bus_id[4:-2].lower()
        xid = (
            f"NVRM: Xid (PCI:{bus}): 31, pid=1337, name=python3, channel 0x0000000a, "
            "intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_4 faulted @ "
            "0xdea_d0000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE"
        )
        cuda = "RuntimeError: CUDA error: an illegal memory access was encountered"
        node = gpu.node
        self.pending_events[node] += [
            _kernel_event(xid, node=node, ts=ts),
            _job_event(cuda, node=node, job_id=job.job_id, ts=ts + 0.5),
        ]
        self.end(job, ts + 1, "FAILED", 1)

    def churn(self, now: float) -> None:
        """Occasionally finish a job and start another, so the fleet keeps moving."""
        if self._rng.random() < 0.2:
            running = [j for j in self.jobs.values() if j.state == "RUNNING" and j.phase != "hang"]
            if running:
                self.end(self._rng.choice(running), now, "COMPLETED", 0)
        if self._rng.random() < 0.3:
            free_nodes = [n for n in {g.node for g in self.gpus if g.job_id is None}]
            if free_nodes:
                node = self._rng.choice(sorted(free_nodes))
                free = len([g for g in self.gpus_of(node) if g.job_id is None])
                self.submit([node], self._rng.randint(1, free), now, phase="compute")

    def _sample(self, gpu: SimGpu, now: float) -> Sample:
        rows = self.profiles[PHASES[gpu.phase]]
        if gpu.phase == "held":
            # The recorded held-idle phase starts with the tail of the compute before it; a job
            # that holds a GPU and does nothing shows only its 0% rows (or idle's).
            rows = [r for r in rows if r["util"] == 0] or self.profiles["idle"]
        row = self._rng.choice(rows)
        power = row["power_mw"] / 1000.0 * self._rng.uniform(0.97, 1.03)
        # The spin/compute trace has no memory column; a job's GPU holds most of its HBM.
        mem_used = 60_000.0 if gpu.job_id else 480.0
        return Sample(
            ts=now,
            gpu_uuid=gpu.uuid,
            util_gpu=float(row["util"]),
            util_mem=float(row["mem_util"]),
            mem_used_mb=mem_used,
            mem_total_mb=MEM_TOTAL_MB,
            power_w=round(power, 1),
            temp_gpu=float(row["temp"]),
            sm_clock_mhz=float(row["sm_clock"]),
        )

    def node_batch(self, node: str, now: float, *, with_identity: bool) -> Batch:
        """One agent batch: the node's GPU samples and any pending events."""
        gpus = self.gpus_of(node)
        identity = (
            [
                GpuInfo(
                    uuid=g.uuid,
                    node=node,
                    index=g.index,
                    pci_bus_id=g.pci_bus_id,
                    name=GPU_NAME,
                    memory_total_mb=MEM_TOTAL_MB,
                    driver_version="580.159.04",
                )
                for g in gpus
            ]
            if with_identity
            else []
        )
        events = self.pending_events.pop(node, [])
        return Batch(
            agent=f"demo-agent-{node}",
            node=node,
            batch_id=uuid.uuid4().hex,
            gpus=identity,
            samples=[self._sample(g, now) for g in gpus],
            events=events,
        )

    def scheduler_batch(self, now: float) -> Batch:
        """What a Slurm source would report: jobs and their GPU allocations."""
        jobs, allocs = [], []
        for job in self.jobs.values():
            jobs.append(
                Job(
                    scheduler=Scheduler.SLURM,
                    job_id=job.job_id,
                    name=f"train-{job.job_id}",
                    user=job.user,
                    account=job.account,
                    partition="gpu",
                    state=job.state,
                    start_ts=job.start_ts,
                    end_ts=job.end_ts,
                    exit_code=job.exit_code,
                    nodes=job.nodes,
                    gpus=job.gpus_per_node * len(job.nodes),
                )
            )
            allocs += [
                Allocation(
                    scheduler=Scheduler.SLURM,
                    job_id=job.job_id,
                    node=node,
                    gpu_index=index,
                    start_ts=job.start_ts,
                    end_ts=job.end_ts,
                )
                for node, index in job.held
            ]
        # Jobs ended an hour ago have been reported often enough; forget them.
        for job_id in [j.job_id for j in self.jobs.values() if j.end_ts and j.end_ts < now - 3600]:
            del self.jobs[job_id]
        return Batch(
            agent="demo-slurm",
            node="slurmctld",
            batch_id=uuid.uuid4().hex,
            jobs=jobs,
            allocations=allocs,
        )

    def tick(self, now: float, *, first: bool = False, churn: bool = True) -> list[Batch]:
        """Everything the fleet reports at `now`: one batch per node plus the scheduler's."""
        if churn and not first:
            self.churn(now)
        batches = [
            self.node_batch(self.node_name(n), now, with_identity=first) for n in range(self.nodes)
        ]
        batches.append(self.scheduler_batch(now))
        return batches


def _kernel_event(line: str, *, node: str, ts: float) -> Event:
    """The event the node agent's kernel-log parser makes of `line`."""
    event = parse_kernel_line(line, node=node, ts=ts)
    if event is None:
        raise ValueError(f"the kernel-log parser no longer reads the demo line {line!r}")
    return event


def _job_event(line: str, *, node: str, job_id: str, ts: float) -> Event:
    """The event the node agent's job-log parser makes of `line`."""
    event = parse_job_line(line, node=node, job_id=job_id, ts=ts)
    if event is None:
        raise ValueError(f"the job-log parser no longer reads the demo line {line!r}")
    return event
