"""The load of `bench scale`: a simulated fleet's agents posting every interval over HTTP.

The fleet is collector/simulator.py's (its GPUs, and telemetry drawn from the real H100 trace
per phase); bodies are written as JSON text directly, because building pydantic models for
10,000 samples a second would take the load generator's share of two cores.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from collector.simulator import MEM_TOTAL_MB, PHASES, DemoFleet, SimGpu
from timeline.models import Allocation, Batch, GpuInfo, Job, Scheduler

NODES_PER_JOB = 4
IDENTITY_NODES = 200  # 1,600 GPU records a setup batch, under max_batch_records


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
        """GPU identities (IDENTITY_NODES nodes a batch: one per node took 6 minutes at 100k
        GPUs), then jobs with whole-node allocations."""
        out = []
        names = list(self.nodes)
        for i in range(0, len(names), IDENTITY_NODES):
            identity = [
                GpuInfo(uuid=g.uuid, node=node, index=g.index, pci_bus_id=g.pci_bus_id)
                for node in names[i : i + IDENTITY_NODES]
                for g in self.nodes[node]
            ]
            out.append(
                Batch(agent="scale-setup", node=names[i], batch_id=uuid.uuid4().hex, gpus=identity)
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

    def body(
        self, node: str, ts: float, rng: random.Random, *, ticks: int = 1, interval_s: float = 10
    ) -> bytes:
        """One agent batch of `node`'s samples, as JSON bytes: `ticks` samples per GPU,
        `interval_s` apart, the newest at `ts` (an agent that pushes every `ticks` polls)."""
        parts = []
        for k in range(ticks):
            parts += self._samples(node, ts - (ticks - 1 - k) * interval_s, rng)
        head = f'{{"agent":"sim-{node}","node":"{node}","batch_id":"{uuid.uuid4().hex}",'
        return (head + '"samples":[' + ",".join(parts) + "]}").encode()

    def _samples(self, node: str, ts: float, rng: random.Random) -> list[str]:
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
        return parts


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
    push_every: int = 1,
) -> LoadResult:
    """Every node posts its samples every `push_every` intervals, nodes spread evenly.

    Each sender owns every `senders`-th node and sends in due order; when the server is slower
    than the fleet, sends fall behind their due time and the lag grows. A lag is the answer's
    time less the batch's oldest sample's: a batch of two polls starts one interval old.
    Senders speak HTTP/1.1 keep-alive through http.client: httpx's CPU per request took a
    third of a core at 1,250 requests/s, on the machine the server was measured on.
    """
    names = list(fleet.nodes)
    result = LoadResult()
    start = time.time() + 1.0
    period = interval_s * push_every
    rounds = max(1, int(seconds // period))
    result.last_ts = start + (rounds - 1) * period + (len(names) - 1) * period / len(names)
    url = urlsplit(base_url)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def sender(w: int) -> None:
        rng = random.Random(w)
        mine = [(i, names[i]) for i in range(w, len(names), senders)]
        conn = _Connection(url.hostname or "127.0.0.1", url.port or 80, headers)
        try:
            for k in range(rounds):
                for i, node in mine:
                    due = start + k * period + i * period / len(names)
                    wait = due - time.time()
                    if wait > 0:
                        time.sleep(wait)
                    body = fleet.body(node, due, rng, ticks=push_every, interval_s=interval_s)
                    n = len(fleet.nodes[node]) * push_every
                    _send(conn, body, due - (push_every - 1) * interval_s, n, result)
        finally:
            conn.close()

    threads = [threading.Thread(target=sender, args=(w,), daemon=True) for w in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result


class _Connection:
    """One keep-alive HTTP/1.1 connection to the server, reopened after an error."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port, self.headers = host, port, headers
        self._conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: bytes) -> tuple[int, dict[str, str]]:
        """POST `body`; the status and headers (the body is read and dropped)."""
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            self._conn.request("POST", path, body=body, headers=self.headers)
            r = self._conn.getresponse()
            r.read()
            return r.status, dict(r.getheaders())
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def close(self) -> None:
        """Close the connection (the next post opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _send(conn: _Connection, body: bytes, oldest: float, n: int, result: LoadResult) -> None:
    """Post one batch; a 503 is retried after its Retry-After, as an agent does."""
    while True:
        try:
            status, headers = conn.post("/api/v1/ingest", body)
        except (OSError, http.client.HTTPException):
            with result.lock:
                result.errors += 1
            time.sleep(1.0)
            continue
        if status == 503:
            with result.lock:
                result.errors += 1
            time.sleep(float(headers.get("Retry-After", "1")))
            continue
        lag = time.time() - oldest
        with result.lock:
            result.requests += 1
            if status == 200:
                result.samples += n
                result.lags.append(lag)
            else:
                result.errors += 1
        return
