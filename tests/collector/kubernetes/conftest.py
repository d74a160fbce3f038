"""Fixtures: the fake API server, a source pointed at it, and a sink for what it emits."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from collector.kubernetes import KubernetesSource
from tests.collector.kubernetes.fakeapi import FakeKubeAPI, fixture
from tests.collector.kubernetes.helpers import Sink, make_source, wait_for


@pytest.fixture
def fake() -> Iterator[FakeKubeAPI]:
    """The fake API server, seeded with a GPU node, a running GPU pod and a CPU-only pod."""
    api = FakeKubeAPI()
    api.apply("nodes", fixture("node_gpu.json"))
    api.apply("pods", fixture("pod_gpu_running.json"))
    cpu_pod = fixture("pod_gpu_running.json")
    cpu_pod["metadata"].update(name="coredns-6f6b679f8f-5m7kq", namespace="kube-system", uid="c-1")
    cpu_pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    api.apply("pods", cpu_pod)
    api.start()
    yield api
    api.stop()


@pytest.fixture
def source(fake: FakeKubeAPI) -> KubernetesSource:
    """A source with the right token."""
    return make_source(fake)


@pytest.fixture
def streaming(
    fake: FakeKubeAPI, source: KubernetesSource
) -> Iterator[tuple[KubernetesSource, Sink]]:
    """The source running (thread per watch) with its emits going to a Sink."""
    sink = Sink()
    stop = threading.Event()
    thread = threading.Thread(target=source.run, args=(sink, stop), daemon=True)
    thread.start()
    wait_for(lambda: all(source.resource_version.values()), "initial lists")
    yield source, sink
    stop.set()
    fake.drop_watches()
    thread.join(timeout=10)
    assert not thread.is_alive(), "source did not stop"
