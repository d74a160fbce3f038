"""Builds timelines for the correlator's tests through the real store API (no fakes)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from correlator import service as correlator_service
from correlator.flows import correlate_once
from correlator.models import CorrelationReport, Incident
from timeline import service
from timeline.db import unit_of_work
from timeline.models import Allocation, Batch, Event, GpuInfo, Job, Node, Sample, Scheduler
from timeline.settings import Settings

TELEMETRY = Path(__file__).resolve().parent.parent / "fixtures" / "telemetry"
H100 = "NVIDIA H100 80GB HBM3"  # as nvidia-smi -q names the real GPU of the traces

# Real lines. Xid 79 as the kernel logs it (quoted in NVIDIA/NVSentinel#155:
# https://github.com/NVIDIA/NVSentinel/issues/155); PyTorch's NCCL watchdog lines as posted in
# https://github.com/hiyouga/LlamaFactory/issues/7396 (SeqNum 1580, last completed 1579).
XID79 = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus."
NCCL_TIMEOUT = (
    "[rank{rank}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
    "NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds "
    "before timing out."
)
# The real Xid 31 the H100 of shared/fixtures logged (dmesg_after_faults.txt).
XID31 = (
    "NVRM: Xid (PCI:0000:00:06): 31, pid=404, name=python3, channel 0x0000000a, intr 00000000. "
    "MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_4 faulted @ 0xdea_d0000000. Fault is of type "
    "FAULT_PDE ACCESS_TYPE_VIRT_WRITE"
)


def load_trace(name: str) -> list[dict[str, Any]]:
    """Rows of a real H100 telemetry trace."""
    lines = (TELEMETRY / name).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# PCI bus ids per GPU index (index 2 sits where the real Xid 79 line above points).
_BUSES = (0x18, 0x2A, 0x44, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


def pci(i: int) -> str:
    """A PCI bus id per GPU index, in the canonical form the store keeps."""
    return f"0000:{_BUSES[i]:02x}:00.0"


def gpu_uuid(node: str, i: int) -> str:
    """A stable GPU uuid per node and index."""
    return f"GPU-{node}-{i}"


class Fleet:
    """A small cluster written into the store, batch by batch, the way ingest writes it."""

    def __init__(self, session_factory: sessionmaker[Session], settings: Settings | None = None):
        self.factory = session_factory
        self.settings = settings or Settings(database_url="sqlite://")

    def _append(self, node: str = "server", received_ts: float | None = None, **items: Any) -> None:
        batch = Batch(agent="test", node=node, batch_id=uuid.uuid4().hex, **items)
        with unit_of_work(self.factory) as s:
            service.append_batch(s, batch=batch, received_ts=received_ts)

    def nodes(self, names: list[str], gpus: int = 8, state: str = "MIXED") -> None:
        """Nodes with their GPUs."""
        for name in names:
            infos = [
                GpuInfo(uuid=gpu_uuid(name, i), node=name, index=i, pci_bus_id=pci(i), name=H100)
                for i in range(gpus)
            ]
            node = Node(name=name, scheduler=Scheduler.SLURM, state=state, gpu_count=gpus)
            self._append(node=name, gpus=infos, nodes=[node])

    def node_state(self, name: str, state: str) -> None:
        """The scheduler reports a node state."""
        self._append(nodes=[Node(name=name, scheduler=Scheduler.SLURM, state=state)])

    def job(
        self,
        job_id: str,
        nodes: list[str],
        *,
        start: float,
        end: float | None = None,
        gpus: list[int] | None = None,
        user: str = "alice",
        account: str = "ml-research",
        state: str = "RUNNING",
        requeue_of: str | None = None,
    ) -> None:
        """A Slurm job holding GPUs (all 8 of each node unless given) from start to end."""
        indexes = gpus if gpus is not None else list(range(8))
        job = Job(
            scheduler=Scheduler.SLURM, job_id=job_id, user=user, account=account, state=state,
            start_ts=start, end_ts=end, nodes=nodes, gpus=len(indexes) * len(nodes),
            requeue_of=requeue_of,
        )  # fmt: skip
        allocs = [
            Allocation(
                scheduler=Scheduler.SLURM,
                job_id=job_id,
                node=n,
                gpu_index=i,
                gpu_uuid=gpu_uuid(n, i),
                start_ts=start,
                end_ts=end,
            )
            for n in nodes
            for i in indexes
        ]
        self._append(jobs=[job], allocations=allocs)

    def events(self, *events: Event, received_ts: float | None = None) -> None:
        """Events as a source delivered them."""
        self._append(events=list(events), received_ts=received_ts)

    def samples(self, node: str, samples: list[Sample]) -> None:
        """Telemetry from a node's agent."""
        self._append(node=node, samples=samples)

    def correlate(self, now: float, **overrides: Any) -> CorrelationReport:
        """One correlator pass at `now` (event time)."""
        settings = self.settings.model_copy(update=overrides) if overrides else self.settings
        return correlate_once(self.factory, settings=settings, now=now)


def all_incidents(session_factory: sessionmaker[Session]) -> list[Incident]:
    """Every incident the store holds, as the incidents service lists them."""
    with session_factory() as s:
        return correlator_service.list_incidents(s)
