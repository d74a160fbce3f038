"""The real Slurm cluster, started once per test session for the live Slurm tests.

Skips loudly when this machine cannot run it (not root, no Slurm and no apt-get), unless
REQUIRE_SLURM=1 (CI), which turns any such reason or a failed start into a failure.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.collector.slurm.live import SlurmCluster, cluster_or_skip


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running 3-node cluster with 8 fake GPUs per node; torn down at the end of the session."""
    cluster = cluster_or_skip(SlurmCluster.start)
    yield cluster
    cluster.stop()


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The recorded cluster ran in UTC; Slurm prints local time."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
