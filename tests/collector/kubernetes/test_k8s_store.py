"""What the Kubernetes source emits is accepted by the real store, once per fact."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from collector.base import Observations
from collector.kubernetes import KubernetesSource
from tests.collector.kubernetes.fakeapi import FakeKubeAPI, fixture
from timeline import queries, service
from timeline.models import Batch


def _store(session: Session, obs: Observations) -> None:
    batch = Batch(
        agent="server:kubernetes",
        node="server:kubernetes",
        batch_id=uuid.uuid4().hex,
        events=obs.events,
        jobs=obs.jobs,
        allocations=obs.allocations,
        nodes=obs.nodes,
    )
    service.append_batch(session, batch=batch)
    session.commit()


def test_kubernetes_observations_are_stored_and_a_relist_adds_no_duplicates(
    fake: FakeKubeAPI, source: KubernetesSource, session: Session
) -> None:
    for ev in fixture("events.json"):
        fake.apply("events", ev)
    fake.apply("pods", fixture("pod_gpu_oomkilled.json"))
    _store(session, source.collect())
    stored = queries.events_in_window(session)
    again = source.collect()  # a second full list: the source's memory says nothing changed
    assert again.events == []
    # A restarted server (new source, empty memory) emits everything again; the store dedups.
    fresh = KubernetesSource(source.api_client)
    _store(session, fresh.collect())
    assert len(queries.events_in_window(session)) == len(stored)
    (job,) = queries.list_jobs(session)
    assert (job["job_id"], job["state"], job["exit_code"]) == (
        "ml-research/train-llama-0",
        "Failed",
        137,
    )
    (node,) = queries.list_nodes(session)
    assert (node["name"], node["state"], node["gpu_count"]) == ("gpu-node-07", "Ready", 8)
