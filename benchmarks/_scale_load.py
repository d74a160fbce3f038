"""The load of `bench scale`: a simulated fleet's agents posting every interval over HTTP.

The fleet is collector/simulator.py's (its GPUs, and telemetry drawn from the real H100 trace
per phase); bodies are written as JSON text directly, because building pydantic models for
10,000 samples a second would take the load generator's share of two cores.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field

import httpx

from collector.simulator import MEM_TOTAL_MB, PHASES, DemoFleet, SimGpu
from timeline.models import Allocation, Batch, GpuInfo, Job, Scheduler

NODES_PER_JOB = 4


@dataclass
class ScaleFleet:
    """GPUs grouped by node, with a job on every NODES_PER_JOB nodes (some idle, a few hung)."""

    gpus: int
    gpus_per_node: int = 8
    seed: int = 7
    nodes: dict[str, list[SimGpu]] = field(default_factory=dict)
    sim: DemoFleet = field(init=False)

    def __post_init__(self) -> None:
        n_nodes = max(1, self.gpus // self.gpus_per_node)
        self.sim = DemoFleet(nodes=n_nodes, gpus_per_node=self.gpus_per_node, seed=self.seed)
        for g in self.sim.gpus:
            self.nodes.setdefault(g.node, []).append(g)
        rng = random.Random(self.seed)
        names = list(self.nodes)
        for j, i in enumerate(range(0, len(names), NODES_PER_JOB)):
            phase = rng.choices(["compute", "held", "hang"], weights=[89, 10, 1])[0]
            for node in names[i : i + NODES_PER_JOB]:
                for g in self.nodes[node]:
                    g.phase, g.job_id = phase, f"scale-{j}"

    def setup_batches(self, now: float) -> list[Batch]:
        """GPU identities per node, then jobs with whole-node allocations, in small batches."""
        out = []
        for node, gpus in self.nodes.items():
            identity = [
                GpuInfo(uuid=g.uuid, node=node, index=g.index, pci_bus_id=g.pci_bus_id)
                for g in gpus
            ]
            out.append(
                Batch(agent="scale-setup", node=node, batch_id=uuid.uuid4().hex, gpus=identity)
            )
        jobs: dict[str, list[str]] = {}
        for node, gpus in self.nodes.items():
            jobs.setdefault(str(gpus[0].job_id), []).append(node)
        items = list(jobs.items())
        for i in range(0, len(items), 400):  # under max_batch_records for allocations
            chunk = items[i : i + 400]
            out.append(
                Batch(
                    agent="scale-slurm",
                    node="slurmctld",
                    batch_id=uuid.uuid4().hex,
                    jobs=[
                        Job(
                            scheduler=Scheduler.SLURM,
                            job_id=j,
                            user="alice",
                            state="RUNNING",
                            start_ts=now - 3600,
                            nodes=nodes,
                            gpus=len(nodes) * self.gpus_per_node,
                        )
                        for j, nodes in chunk
                    ],
                    allocations=[
                        Allocation(scheduler=Scheduler.SLURM, job_id=j, node=n, start_ts=now - 3600)
                        for j, nodes in chunk
                        for n in nodes
                    ],
                )
            )
        return out

    def body(self, node: str, ts: float, rng: random.Random) -> bytes:
        """One agent batch of `node`'s samples at `ts`, as JSON bytes."""
        parts = []
        for g in self.nodes[node]:
            rows = self.sim.profiles[PHASES[g.phase]]
            if g.phase == "held":
                rows = [r for r in rows if r["util"] == 0] or self.sim.profiles["idle"]
            r = rng.choice(rows)
            power = r["power_mw"] / 1000.0 * rng.uniform(0.97, 1.03)
            parts.append(
                f'{{"ts":{ts:.3f},"gpu_uuid":"{g.uuid}","util_gpu":{float(r["util"])},'
                f'"util_mem":{float(r["mem_util"])},"mem_used_mb":60000.0,'
                f'"mem_total_mb":{MEM_TOTAL_MB},"power_w":{power:.1f},'
                f'"temp_gpu":{float(r["temp"])},"sm_clock_mhz":{float(r["sm_clock"])}}}'
            )
        head = f'{{"agent":"sim-{node}","node":"{node}","batch_id":"{uuid.uuid4().hex}",'
        return (head + '"samples":[' + ",".join(parts) + "]}").encode()


@dataclass
class LoadResult:
    """What the senders measured."""

    samples: int = 0
    requests: int = 0
    errors: int = 0
    lags: list[float] = field(default_factory=list)  # ack time - sample time, seconds
    last_ts: float = 0.0  # the newest sample time sent
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_load(
    fleet: ScaleFleet,
    *,
    base_url: str,
    token: str,
    interval_s: float,
    seconds: float,
    senders: int,
) -> LoadResult:
    """Every node posts its samples once per interval, nodes spread evenly over the interval.

    Each sender owns every `senders`-th node and sends in due order; when the server is slower
    than the fleet, sends fall behind their due time and the lag (ack - sample time) grows.
    """
    names = list(fleet.nodes)
    result = LoadResult()
    start = time.time() + 1.0
    ticks = max(1, int(seconds // interval_s))
    result.last_ts = start + (ticks - 1) * interval_s + (len(names) - 1) * interval_s / len(names)

    def sender(w: int) -> None:
        rng = random.Random(w)
        mine = [(i, names[i]) for i in range(w, len(names), senders)]
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
            for k in range(ticks):
                for i, node in mine:
                    due = start + k * interval_s + i * interval_s / len(names)
                    wait = due - time.time()
                    if wait > 0:
                        time.sleep(wait)
                    _send(client, fleet.body(node, due, rng), due, len(fleet.nodes[node]), result)

    threads = [threading.Thread(target=sender, args=(w,), daemon=True) for w in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result


def _send(client: httpx.Client, body: bytes, due: float, n: int, result: LoadResult) -> None:
    """Post one batch; a 503 is retried after its Retry-After, as an agent does."""
    while True:
        try:
            r = client.post("/api/v1/ingest", content=body)
        except httpx.HTTPError:
            with result.lock:
                result.errors += 1
            time.sleep(1.0)
            continue
        if r.status_code == 503:
            with result.lock:
                result.errors += 1
            time.sleep(float(r.headers.get("Retry-After", "1")))
            continue
        lag = time.time() - due
        with result.lock:
            result.requests += 1
            if r.status_code == 200:
                result.samples += n
                result.lags.append(lag)
            else:
                result.errors += 1
        return
