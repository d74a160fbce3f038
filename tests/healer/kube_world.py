"""The Kubernetes world the healer's K8s tests share: the fake API server with three GPU nodes
and a running job's pod, the actor pointed at it, and the timeline's view of the same."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session, sessionmaker

from collector.kubernetes import make_api_client
from healer.kubernetes import KubernetesActor
from tests.collector.kubernetes.fakeapi import FakeKubeAPI, fixture
from tests.healer.helpers import append
from timeline.models import Allocation, Job, Node, Scheduler

POD = "ml-research/train-llama-5xq2k"
NODES = ["gpu-node-07", "gpu-node-08", "gpu-node-09"]


def started_api() -> FakeKubeAPI:
    """A started fake API server holding three GPU nodes, the job's pod and its Job."""
    fake = FakeKubeAPI()
    for name in NODES:
        node = fixture("node_gpu.json")
        node["metadata"]["name"] = name
        fake.apply("nodes", node)
    fake.apply("pods", fixture("pod_job_running.json"))
    fake.workloads["jobs/ml-research/train-llama"] = fixture("job_train.json")
    fake.start()
    return fake


def actor(fake: FakeKubeAPI, kinds: tuple[str, ...] = ("Job",)) -> KubernetesActor:
    """The healer's actor, talking to the fake server through the real client."""
    return KubernetesActor(
        make_api_client(fake.url, fake.token), cluster="k8s", recreate_kinds=kinds, timeout_s=5
    )


def world(factory: sessionmaker[Session], *, job: str = POD, node: str = "gpu-node-07") -> float:
    """The Kubernetes source's view: three GPU nodes and the pod running on one."""
    now = time.time()
    append(
        factory,
        nodes=[
            Node(name=n, scheduler=Scheduler.KUBERNETES, cluster="k8s", state="Ready")
            for n in NODES
        ],
    )
    pod = Job(
        scheduler=Scheduler.KUBERNETES,
        job_id=job,
        cluster="k8s",
        user="alice",
        account="ml-research",
        state="Running",
        start_ts=now - 60,
        nodes=[node],
        gpus=8,
    )
    alloc = Allocation(scheduler=Scheduler.KUBERNETES, job_id=job, node=node, start_ts=now - 60)
    append(factory, jobs=[pod], allocations=[alloc])
    return now


def writes(fake: FakeKubeAPI) -> list[tuple[str, str]]:
    """The (method, path) of every write the fake server took, in order."""
    return [(m, p) for m, p, _ in fake.writes]
