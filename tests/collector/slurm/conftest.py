"""The real Slurm cluster, started once per test session for the live Slurm tests.

Skips loudly when this machine cannot run it (not root, no Slurm and no apt-get), unless
REQUIRE_SLURM=1 (CI), which turns any such reason or a failed start into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.collector.slurm.live import SlurmCluster, why_no_slurm


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running 3-node cluster with 8 fake GPUs per node; torn down at the end of the session."""
    required = os.environ.get("REQUIRE_SLURM", "") == "1"
    reason = why_no_slurm()
    if reason:
        if required:
            pytest.fail(f"REQUIRE_SLURM=1 but no real Slurm can run here: {reason}")
        pytest.skip(f"SKIPPED (no real Slurm): {reason}; CI runs these with REQUIRE_SLURM=1")
    try:
        cluster = SlurmCluster.start()
    except Exception as exc:  # a failed install or start: the reason is in the message
        if required:
            pytest.fail(f"REQUIRE_SLURM=1 but the Slurm test cluster did not start: {exc}")
        pytest.skip(f"SKIPPED (Slurm test cluster did not start): {exc}")
    yield cluster
    cluster.stop()
