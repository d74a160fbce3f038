"""A real Slurm cluster with Slurm's default timing for the healer's live tests (one per test
session; the collector's own cluster runs with shortened timing), and an SQLite store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from benchmarks._slurm_stack import start_cluster, stop_cluster
from tests.collector.slurm.live import why_no_slurm
from timeline import db


@pytest.fixture(scope="session")
def healer_cluster() -> Iterator[tuple[Path, str]]:
    """(cluster dir, SLURM_CONF) of a 3-node cluster; skips loudly, or fails under REQUIRE_SLURM."""
    required = os.environ.get("REQUIRE_SLURM", "") == "1"
    reason = why_no_slurm()
    if reason:
        if required:
            pytest.fail(f"REQUIRE_SLURM=1 but no real Slurm can run here: {reason}")
        pytest.skip(f"SKIPPED (no real Slurm): {reason}; CI runs these with REQUIRE_SLURM=1")
    try:
        root, conf = start_cluster("default")
    except Exception as exc:
        if required:
            pytest.fail(f"REQUIRE_SLURM=1 but the Slurm test cluster did not start: {exc}")
        pytest.skip(f"SKIPPED (Slurm test cluster did not start): {exc}")
    yield root, conf
    stop_cluster(root)


@pytest.fixture
def sqlite_factory(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """A fresh migrated SQLite store (the live Slurm tests run once, not per backend)."""
    url = f"sqlite:///{tmp_path / 'healer.db'}"
    db.upgrade(url)
    engine = db.make_engine(url)
    yield db.make_sessionmaker(engine)
    engine.dispose()
