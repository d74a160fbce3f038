"""A real Slurm cluster with Slurm's default timing for the healer's live tests (one per test
session; the collector's own cluster runs with shortened timing). `sqlite_factory` is the root
conftest's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks._slurm_stack import start_cluster, stop_cluster
from tests.collector.slurm.live import cluster_or_skip


@pytest.fixture(scope="session")
def healer_cluster() -> Iterator[tuple[Path, str]]:
    """(cluster dir, SLURM_CONF) of a 3-node cluster; skips loudly, or fails under REQUIRE_SLURM."""
    root, conf = cluster_or_skip(lambda: start_cluster("default"))
    yield root, conf
    stop_cluster(root)
