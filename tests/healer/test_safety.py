"""Retry budget with backoff over a job's lineage, per-node escalation (heals, one GPU's fatal
faults, flapping), and one healer per database."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from healer import safety, service
from healer.models import Action, ActionKind, ActionMode, ActionState, Lineage
from healer.policy import Policy
from tests.healer.helpers import XID79, cluster, fault
from timeline.db import unit_of_work


def _done(s: Session, key: str, kind: ActionKind, *, at: float, **kw: object) -> Action:
    a = Action(key=key, kind=kind, mode=ActionMode.ACT, cluster="fmtest", **kw)  # type: ignore[arg-type]
    service.insert_action(s, action=a, now=at)
    aid = int(a.id or 0)
    service.transition(
        s, action_id=aid, to=ActionState.RUNNING, from_states=[ActionState.PLANNED], now=at
    )
    return service.transition(
        s,
        action_id=aid,
        to=ActionState.DONE,
        from_states=[ActionState.RUNNING],
        now=at,
        result={"holding": True} if kind is ActionKind.DRAIN else {},
    )


def test_retry_budget_counts_the_whole_lineage_and_backs_off(
    session_factory: sessionmaker[Session],
) -> None:
    policy = Policy(requeue_budget=3, requeue_backoff_s=60.0)
    now = time.time()
    nxt = Action(key="next", kind=ActionKind.RECOVER, job_id="12")
    with unit_of_work(session_factory) as s:
        assert safety.recovery_gate(s, policy=policy, action=nxt, limit=None, now=now) == (
            None,
            None,
        )
        _done(s, "r1", ActionKind.RECOVER, at=now - 300, job_id="10")
        service.add_lineage(
            s,
            lineage=Lineage(
                scheduler="slurm",
                old_job_id="10",
                new_job_id="11",
                how="resubmit",
                action_id=1,
                ts=now - 300,
            ),
        )
        _done(s, "r2", ActionKind.RECOVER, at=now - 30, job_id="11")
        service.add_lineage(
            s,
            lineage=Lineage(
                scheduler="slurm",
                old_job_id="11",
                new_job_id="12",
                how="resubmit",
                action_id=2,
                ts=now - 30,
            ),
        )
        why, until = safety.recovery_gate(s, policy=policy, action=nxt, limit=None, now=now)
        assert why is None and until == now - 30 + 120  # the third waits 2 x 60 s after the 2nd
        assert safety.recovery_gate(s, policy=policy, action=nxt, limit=1, now=now)[0]
        _done(s, "r3", ActionKind.RECOVER, at=now - 1, job_id="12")
        why, _ = safety.recovery_gate(s, policy=policy, action=nxt, limit=None, now=now)
    assert why is not None and "budget 3" in why


def test_a_node_healed_three_times_in_a_week_needs_support(
    session_factory: sessionmaker[Session],
) -> None:
    policy, now = Policy(), time.time()
    drain = Action(key="x", kind=ActionKind.DRAIN, node="node1", cluster="fmtest")
    with unit_of_work(session_factory) as s:
        _done(s, "old", ActionKind.DRAIN, at=now - 8 * 86400.0, node="node1")  # outside
        _done(s, "d1", ActionKind.DRAIN, at=now - 6 * 86400.0, node="node1")
        # One heal before this drain: this one is the second.
        assert safety.escalation(s, policy=policy, action=drain, incident=None, now=now) is None
        _done(s, "d2", ActionKind.DRAIN, at=now - 86400.0, node="node1")
        why = safety.escalation(s, policy=policy, action=drain, incident=None, now=now)
    assert why == "healed 3 times in 7 days: contact support"


def test_the_same_gpu_failing_three_times_a_day_needs_support(
    session_factory: sessionmaker[Session],
) -> None:
    cluster(session_factory, nodes=["node1"])
    now = time.time()
    incidents = [
        fault(session_factory, XID79.replace("79", code), node="node1", ts=now - 3600 * i)
        for i, code in enumerate(("79", "48", "95"))  # three fatal faults of GPU 3b:00
    ]
    drain = Action(key="x", kind=ActionKind.DRAIN, node="node1", cluster="fmtest")
    with session_factory() as s:
        why = safety.escalation(s, policy=Policy(), action=drain, incident=incidents[0], now=now)
    assert why is not None and why.startswith("GPU 0000:3b:00.0: 3 fatal faults in 24 h")


def test_drained_returned_and_drained_again_is_flapping(
    session_factory: sessionmaker[Session],
) -> None:
    now = time.time()
    drain = Action(key="x", kind=ActionKind.DRAIN, node="node2", cluster="fmtest")
    with unit_of_work(session_factory) as s:
        _done(s, "d1", ActionKind.DRAIN, at=now - 7200, node="node2")
        _done(s, "r1", ActionKind.RETURN, at=now - 3600, node="node2")
        why = safety.escalation(s, policy=Policy(), action=drain, incident=None, now=now)
    assert why is not None and why.startswith("flapping")


def test_one_healer_per_database(engine: Engine, tmp_path: Path) -> None:
    lock_dir = tmp_path
    first = safety.HealerLock(engine, lock_dir=lock_dir)
    second = safety.HealerLock(engine, lock_dir=lock_dir)
    assert first.acquire() and first.acquire()  # re-entrant for its holder
    assert not second.acquire()
    first.release()
    assert second.acquire()
    second.release()
