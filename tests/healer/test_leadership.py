"""The healer as the server wires it acts only while its process leads (issue #13's fence)."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from healer.jobs import HealerRunner
from healer.policy import PolicyFile
from timeline import lease
from timeline.db import unit_of_work
from web.runtime import ServerRuntime

from .helpers import XID79, acting, actions, cluster, fault, running_job


def _take(factory: sessionmaker[Session], holder: str, ttl_s: float) -> int:
    with unit_of_work(factory) as s:
        got = lease.acquire(s, holder=holder, ttl_s=ttl_s)
    assert got is not None
    return got.epoch


def test_a_replica_that_lost_the_lease_plans_and_records_no_action(
    session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    runtime = ServerRuntime(session_factory)
    policy = PolicyFile(None)
    policy.policy = acting()
    runner = HealerRunner(
        session_factory,
        engine=session_factory.kw["bind"],
        policy=policy,
        actors={},
        lock_dir=tmp_path,
        fence=runtime.fence,
    )
    try:
        cluster(session_factory, nodes=["node1", "node2"])
        running_job(session_factory, "77", ["node1"], start=time.time() - 60)
        runtime.epoch = _take(session_factory, "this-replica", ttl_s=0.3)
        time.sleep(0.45)  # paused past its lease ...
        _take(session_factory, "other-replica", ttl_s=30.0)  # ... and another replica leads
        fault(session_factory, XID79, node="node1", ts=time.time())
        stale = runner.run_once()
        assert stale.skipped and "not the leader" in stale.skipped
        assert actions(session_factory) == []  # nothing planned, nothing recorded
        runtime.epoch = _take(session_factory, "other-replica", ttl_s=30.0)  # the leader's own pass
        runner.run_once()
        assert any(a.kind.value == "drain" and a.node == "node1" for a in actions(session_factory))
    finally:
        runner.lock.release()  # a session-level advisory lock on PostgreSQL
