"""A realistic day of a GPU fleet for the correlate benchmark: nodes, jobs, allocations, events.

Half the nodes run single-node jobs (two 4-GPU jobs side by side), the other half form groups of
8 nodes running multi-node jobs. Events: job state changes, W&B progress, correctable ECC noise,
floods of identical Xid lines, Xid 79 under multi-node jobs followed by NCCL timeouts on every
rank, lagging-rank NCCL hangs, user-code faults and CUDA OOMs. Lines are the real formats used by
the tests (tests/correlator/correlator_fleet.py cites their sources).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from timeline.models import Allocation, Event, EventKind, GpuInfo, Job, Node, Scheduler, Severity

XID79 = "NVRM: Xid (PCI:{bus}): 79, GPU has fallen off the bus."
XID63 = (
    "NVRM: Xid (PCI:{bus}): 63, pid=1234, name=python, Row Remapper: New row marked for remapping"
)
XID31 = (
    "NVRM: Xid (PCI:{bus}): 31, pid=404, name=python3, channel 0x0000000a, intr 00000000. MMU "
    "Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_4 faulted @ 0xdea_d0000000. Fault is of type "
    "FAULT_PDE ACCESS_TYPE_VIRT_WRITE"
)
WATCHDOG = (
    "[rank{rank}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
    "NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds "
    "before timing out."
)
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
    "capacity of 79.11 GiB of which 6.19 MiB is free."
)
ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
H100 = "NVIDIA H100 80GB HBM3"


def bus(i: int) -> str:
    """PCI bus id of GPU index i, as the kernel prints it (domain:bus:device)."""
    return f"0000:{BUSES[i]:02x}:00"


@dataclass
class SimJob:
    """One job of the simulated day."""

    job_id: str
    nodes: list[str]
    gpus: list[int]
    start: float
    end: float | None
    user: str
    account: str


@dataclass
class FleetDay:
    """Everything the benchmark writes before it measures."""

    gpus: list[GpuInfo] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    jobs: list[SimJob] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def job_models(self) -> tuple[list[Job], list[Allocation]]:
        """Jobs and allocations as the store takes them."""
        jobs, allocs = [], []
        for j in self.jobs:
            state = "RUNNING" if j.end is None else "COMPLETED"
            jobs.append(
                Job(
                    scheduler=Scheduler.SLURM,
                    job_id=j.job_id,
                    user=j.user,
                    account=j.account,
                    state=state,
                    start_ts=j.start,
                    end_ts=j.end,
                    nodes=j.nodes,
                    gpus=len(j.gpus) * len(j.nodes),
                )
            )
            allocs += [
                Allocation(
                    scheduler=Scheduler.SLURM,
                    job_id=j.job_id,
                    node=n,
                    gpu_index=g,
                    gpu_uuid=f"GPU-{n}-{g}",
                    start_ts=j.start,
                    end_ts=j.end,
                )
                for n in j.nodes
                for g in j.gpus
            ]
        return jobs, allocs


def _ev(ts: float, node: str | None, kind: EventKind, **kw: object) -> Event:
    return Event(ts=ts, node=node, source=str(kw.pop("source", "kmsg")), kind=kind, **kw)  # type: ignore[arg-type]


def build_day(*, nodes: int, start: float, end: float, seed: int = 7) -> FleetDay:
    """Nodes, GPUs and a day of jobs in [start, end); the last job on each slot keeps running."""
    rng = random.Random(seed)
    day = FleetDay()
    names = [f"gpu-node-{i:03d}" for i in range(nodes)]
    for n in names:
        day.nodes.append(Node(name=n, scheduler=Scheduler.SLURM, state="MIXED", gpu_count=8))
        day.gpus += [
            GpuInfo(uuid=f"GPU-{n}-{g}", node=n, index=g, pci_bus_id=bus(g) + ".0", name=H100)
            for g in range(8)
        ]
    half = nodes // 2
    slots = [([n], [0, 1, 2, 3]) for n in names[:half]] + [
        ([n], [4, 5, 6, 7]) for n in names[:half]
    ]
    slots += [(names[i : i + 8], list(range(8))) for i in range(half, nodes - 7, 8)]
    seq = 0
    for slot_nodes, gpus in slots:
        t = start
        mean = 3600.0 if len(slot_nodes) == 1 else 7200.0
        while t < end:
            dur = rng.uniform(0.5, 1.5) * mean
            seq += 1
            stop = None if t + dur >= end else t + dur
            user = f"user{rng.randrange(40):02d}"
            day.jobs.append(
                SimJob(str(100000 + seq), slot_nodes, gpus, t, stop, user, f"acct{hash(user) % 8}")
            )
            t += dur
    return day


def add_events(day: FleetDay, *, until: float, seed: int = 11) -> None:
    """A day of events for the jobs that ended before `until` (and progress for all)."""
    rng = random.Random(seed)
    ended = [j for j in day.jobs if j.end is not None and j.end < until]
    multi = [j for j in ended if len(j.nodes) > 1]
    single = [j for j in ended if len(j.nodes) == 1]
    rng.shuffle(multi)
    rng.shuffle(single)
    xid79_jobs, lag_jobs = multi[: len(multi) // 3], multi[len(multi) // 3 : len(multi) // 2]
    user_jobs, oom_jobs = single[:200], single[200:400]
    failed = {j.job_id for j in xid79_jobs + lag_jobs + user_jobs + oom_jobs}
    for j in day.jobs:
        _lifecycle(day, j, failed=j.job_id in failed, until=until)
    for j in xid79_jobs:
        _xid79_under(day, j, rng)
    for j in lag_jobs:
        _timeouts(day, j, lag_rank=rng.randrange(8 * len(j.nodes)))
    for j in user_jobs:
        _user_fault(day, j)
    for j in oom_jobs:
        assert j.end is not None
        day.events.append(
            _ev(j.end - 1, j.nodes[0], EventKind.CUDA_OOM, source="joblog", job_id=j.job_id,
                raw=OOM, severity=Severity.ERROR)
        )  # fmt: skip
    _noise_and_floods(day, rng, until)
    day.events.sort(key=lambda e: e.ts)


def _lifecycle(day: FleetDay, j: SimJob, *, failed: bool, until: float) -> None:
    """RUNNING at start, a W&B step every 2 minutes, COMPLETED or FAILED at the end."""
    node = j.nodes[0]
    day.events.append(
        _ev(j.start, node, EventKind.JOB_STATE, source="slurm", job_id=j.job_id,
            payload={"state": "RUNNING"})
    )  # fmt: skip
    stop = j.end if j.end is not None and j.end < until else until
    day.events += [
        _ev(j.start + 120 * (k + 1), node, EventKind.PROGRESS, source="wandb", job_id=j.job_id,
            payload={"step": k})
        for k in range(int((stop - j.start) // 120))
    ]  # fmt: skip
    if j.end is not None and j.end < until:
        state = "FAILED" if failed else "COMPLETED"
        day.events.append(
            _ev(j.end, node, EventKind.JOB_STATE, source="slurm", job_id=j.job_id,
                code=1 if failed else 0, severity=Severity.ERROR if failed else Severity.INFO,
                payload={"state": state})
        )  # fmt: skip


def _user_fault(day: FleetDay, j: SimJob) -> None:
    """An illegal memory access: the kernel's Xid 31 and the program's CUDA error."""
    assert j.end is not None
    node, g = j.nodes[0], j.gpus[0]
    day.events.append(
        _ev(j.end - 2, node, EventKind.XID, code=31, pci_bus_id=bus(g),
            raw=XID31.replace("0000:00:06", bus(g)), severity=Severity.ERROR)
    )  # fmt: skip
    day.events.append(
        _ev(j.end - 1, node, EventKind.CUDA_ERROR, source="joblog", job_id=j.job_id,
            raw=ILLEGAL, severity=Severity.ERROR)
    )  # fmt: skip


def _xid79_under(day: FleetDay, j: SimJob, rng: random.Random) -> None:
    assert j.end is not None
    node, g = rng.choice(j.nodes), rng.choice(j.gpus)
    day.events.append(
        _ev(
            j.end - 610,
            node,
            EventKind.XID,
            code=79,
            pci_bus_id=bus(g),
            raw=XID79.format(bus=bus(g)),
            severity=Severity.CRITICAL,
        )
    )
    _timeouts(day, j, lag_rank=None)


def _timeouts(day: FleetDay, j: SimJob, *, lag_rank: int | None) -> None:
    assert j.end is not None
    for r in range(8 * len(j.nodes)):
        seq = 1579 if r == lag_rank else 1580
        day.events.append(
            _ev(
                j.end - 10 + r * 0.01,
                j.nodes[r // 8],
                EventKind.NCCL_TIMEOUT,
                source="joblog",
                job_id=j.job_id,
                raw=WATCHDOG.format(rank=r, seq=seq),
                severity=Severity.ERROR,
                payload={"rank": r, "seq_num": seq, "op_type": "ALLREDUCE", "timeout_ms": 600000},
            )
        )


def _noise_and_floods(day: FleetDay, rng: random.Random, until: float) -> None:
    names = [n.name for n in day.nodes]
    lo = min(j.start for j in day.jobs)
    for _ in range(5000):  # correctable ECC counters moving: low-priority, per GPU
        g = rng.randrange(8)
        day.events.append(
            _ev(
                rng.uniform(lo, until),
                rng.choice(names),
                EventKind.ECC,
                source="nvml",
                pci_bus_id=bus(g),
                payload={"sbe": 1},
            )
        )
    for _ in range(30):  # floods: the same Xid line again and again on one GPU
        node, g, t0 = rng.choice(names), rng.randrange(8), rng.uniform(lo, until - 3600)
        raw = XID63.format(bus=bus(g))
        day.events += [
            _ev(
                t0 + k * 0.5,
                node,
                EventKind.XID,
                code=63,
                pci_bus_id=bus(g),
                raw=raw,
                severity=Severity.ERROR,
            )
            for k in range(1000)
        ]
    node = rng.choice(names)
    day.events.append(
        _ev(
            until - 7200,
            node,
            EventKind.XID,
            code=63,
            pci_bus_id=bus(0),
            raw=XID63.format(bus=bus(0)),
            count=800_000,
        )
    )
