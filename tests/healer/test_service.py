"""The healer's store: idempotent actions, the state machine, the fence hook, approvals."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from healer import service
from healer.models import Action, ActionKind, ActionMode, ActionState, Lineage, Notice
from timeline.db import unit_of_work
from timeline.errors import Conflict, NotFound


class StaleLeader(Exception):
    """What issue #13's fence raises when this process no longer leads."""


def planned(key: str = "drain:c:n1:i1:e0:g0", mode: ActionMode = ActionMode.ACT) -> Action:
    return Action(
        key=key,
        kind=ActionKind.DRAIN,
        mode=mode,
        scheduler="slurm",
        cluster="c",
        node="n1",
        incident_id=1,
        reason="fleetmedic: test [incident 1]",
    )


def test_the_same_work_planned_twice_is_one_action(session_factory: sessionmaker[Session]) -> None:
    with unit_of_work(session_factory) as s:
        assert service.insert_action(s, action=planned(), now=1.0)
        assert not service.insert_action(s, action=planned(), now=2.0)
    with session_factory() as s:
        (only,) = service.list_actions(s)
    assert (only.state, only.created_ts) == (ActionState.PLANNED, 1.0)


def test_a_fence_that_raises_rolls_the_state_change_back(
    session_factory: sessionmaker[Session],
) -> None:
    with unit_of_work(session_factory) as s:
        service.insert_action(s, action=planned(), now=1.0)
        (a,) = service.list_actions(s)

    def fence(_: Session) -> None:
        raise StaleLeader("another process leads now")

    with pytest.raises(StaleLeader), unit_of_work(session_factory) as s:
        service.transition(
            s,
            action_id=int(a.id or 0),
            to=ActionState.APPROVED,
            from_states=[ActionState.PLANNED],
            now=2.0,
            fence=fence,
        )
    with pytest.raises(StaleLeader), unit_of_work(session_factory) as s:
        service.insert_action(s, action=planned("other"), now=2.0, fence=fence)
    with session_factory() as s:
        (still,) = service.list_actions(s)
    assert still.state is ActionState.PLANNED  # nothing the stale leader did stuck


def test_transitions_only_from_the_states_allowed(session_factory: sessionmaker[Session]) -> None:
    with unit_of_work(session_factory) as s:
        service.insert_action(s, action=planned(), now=1.0)
        (a,) = service.list_actions(s)
        aid = int(a.id or 0)
        service.transition(
            s, action_id=aid, to=ActionState.RUNNING, from_states=[ActionState.PLANNED], now=2.0
        )
        with pytest.raises(Conflict, match="is running"):
            service.approve(s, action_id=aid, by="admin:bob", now=3.0)
        with pytest.raises(Conflict):
            service.reject(s, action_id=aid, by="admin:bob", now=3.0)
        done = service.transition(
            s, action_id=aid, to=ActionState.DONE, from_states=[ActionState.RUNNING], now=4.0
        )
    assert (done.started_ts, done.finished_ts) == (2.0, 4.0)
    with session_factory() as s, pytest.raises(NotFound):
        service.get_action(s, action_id=aid + 100)


def test_observe_mode_cannot_be_approved_but_proposed_can(
    session_factory: sessionmaker[Session],
) -> None:
    with unit_of_work(session_factory) as s:
        service.insert_action(s, action=planned("a", ActionMode.OBSERVE), now=1.0)
        service.insert_action(s, action=planned("b", ActionMode.PROPOSED), now=1.0)
        obs, prop = sorted(service.list_actions(s), key=lambda x: x.key)
        with pytest.raises(Conflict, match="observe mode"):
            service.approve(s, action_id=int(obs.id or 0), by="admin:bob", now=2.0)
        ok = service.approve(s, action_id=int(prop.id or 0), by="admin:bob", now=2.0)
    assert (ok.state, ok.approved_by) == (ActionState.APPROVED, "admin:bob")
    with session_factory() as s:
        trail = service.list_audit(s, action_id=int(prop.id or 0))
    assert [(e.actor, e.output) for e in trail] == [("admin:bob", "approved by admin:bob")]


def test_counts_per_kind_and_state_for_the_metric(session_factory: sessionmaker[Session]) -> None:
    with unit_of_work(session_factory) as s:
        for i in range(3):
            service.insert_action(s, action=planned(f"k{i}"), now=1.0)
        (a, *_) = service.list_actions(s)
        service.reject(s, action_id=int(a.id or 0), by="admin:bob", now=2.0)
    with session_factory() as s:
        counts = {(c.action, c.result): c.count for c in service.action_counts(s)}
    assert counts == {("drain", "planned"): 2, ("drain", "cancelled"): 1}


def test_lineage_follows_resubmissions_back_to_the_first_job(
    session_factory: sessionmaker[Session],
) -> None:
    with unit_of_work(session_factory) as s:
        for i, (old, new) in enumerate((("100", "101"), ("101", "102"))):
            service.add_lineage(
                s,
                lineage=Lineage(
                    scheduler="slurm",
                    old_job_id=old,
                    new_job_id=new,
                    how="resubmit",
                    action_id=i + 1,
                    ts=float(i),
                ),
            )
        service.add_lineage(
            s,
            lineage=Lineage(
                scheduler="slurm",
                old_job_id="100",
                new_job_id="101",
                how="resubmit",
                action_id=1,
                ts=5.0,
            ),
        )
    with session_factory() as s:
        assert [x.new_job_id for x in service.job_lineage(s, job_id="102")] == ["101", "102"]
        assert service.lineage_root(s, job_id="102") == "100"


def test_notices_are_queued_once_and_marked_sent(session_factory: sessionmaker[Session]) -> None:
    n = Notice(
        key="incident:1:owner:alice", ts=1.0, kind="owner", recipient="alice", subject="s", body="b"
    )
    with unit_of_work(session_factory) as s:
        assert service.add_notice(s, notice=n)
        assert not service.add_notice(s, notice=n)
    with unit_of_work(session_factory) as s:
        (queued,) = service.list_notices(s, unsent=True)
        service.mark_notice_sent(s, notice_id=int(queued.id or 0), ts=2.0)
    with session_factory() as s:
        assert service.list_notices(s, unsent=True) == []
        assert service.list_notices(s)[0].sent_ts == 2.0
