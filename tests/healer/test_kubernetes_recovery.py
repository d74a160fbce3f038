"""The healer's recovery on Kubernetes, against the fake API server: a GPU reset in place of a
cordon and its fallback, the retry budget, a node healed too often, and the checkpoint directory
the recreated Job resumes from."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from healer import service
from healer.models import ActionState
from tests.collector.kubernetes.fakeapi import FakeKubeAPI, fixture
from tests.healer.helpers import XID79, acting, append, by_kind, context, fault, heal
from tests.healer.kube_world import POD, actor, started_api, world, writes


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    fake = started_api()
    yield fake
    fake.stop()


def _reset(api: FakeKubeAPI, factory: sessionmaker[Session], command: list[str]) -> None:
    """Heal with GPU resets on (the command runs for real) after an Xid 95 on gpu-node-07."""
    from collector.slurm.runner import SubprocessRunner

    fault(factory, XID95, node="gpu-node-07", ts=world(factory))
    rules = [r.model_copy(update={"gpu_reset": True}) for r in acting().rules]
    policy = acting(rules=rules, gpu_reset_command=command)
    ctx = context(factory, policy, {"kubernetes": actor(api)}, runner=SubprocessRunner())
    heal(ctx, passes=2)


XID95 = XID79.replace(": 79,", ": 95,")  # uncontained ECC: NVIDIA's catalog says RESET_GPU


def test_a_gpu_reset_that_works_replaces_the_cordon(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    _reset(api, session_factory, ["true", "{node}", "{pci}"])
    kinds = by_kind(session_factory)
    assert "drain" not in kinds and kinds["reset_gpu"][0].state is ActionState.DONE
    with session_factory() as s:
        (cmd,) = [
            e
            for e in service.list_audit(s, action_id=int(kinds["reset_gpu"][0].id or 0))
            if e.what == "command"
        ]
    assert cmd.request == ["true", "gpu-node-07", "0000:3b:00.0"] and cmd.rc == 0
    assert ("PATCH", "/api/v1/nodes/gpu-node-07") not in writes(api)
    assert kinds["recover"][0].state is ActionState.DONE  # the job still moves


def test_a_gpu_reset_that_fails_falls_back_to_cordoning(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    _reset(api, session_factory, ["false"])
    kinds = by_kind(session_factory)
    assert kinds["reset_gpu"][0].state is ActionState.FAILED
    assert "draining instead" in str(kinds["reset_gpu"][0].error)
    assert kinds["drain"][0].state is ActionState.DONE
    assert ("PATCH", "/api/v1/nodes/gpu-node-07") in writes(api)


def test_a_job_past_its_retry_budget_is_not_recovered_and_a_person_is_told(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    from healer.models import Action, ActionKind, ActionMode

    now = world(session_factory)
    with session_factory.begin() as s:  # it was recovered once already today
        old = Action(key="earlier", kind=ActionKind.RECOVER, mode=ActionMode.ACT, job_id=POD)
        service.insert_action(s, action=old, now=now - 600)
        for state in (ActionState.RUNNING, ActionState.DONE):
            service.transition(
                s,
                action_id=int(old.id or 0),
                to=state,
                from_states=[ActionState.PLANNED, ActionState.RUNNING],
                now=now - 600,
            )
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    heal(context(session_factory, acting(requeue_budget=1), {"kubernetes": actor(api)}))
    (rec,) = [a for a in by_kind(session_factory)["recover"] if a.key != "earlier"]
    assert rec.state is ActionState.CANCELLED and "budget 1" in str(rec.error)
    assert not any(m == "POST" for m, _ in writes(api))
    with session_factory() as s:
        told = [n for n in service.list_notices(s) if "not recovered again" in n.subject]
    assert len(told) == 1


def test_a_node_healed_three_times_this_week_stays_out_for_support(
    api: FakeKubeAPI, session_factory: sessionmaker[Session]
) -> None:
    from collector.slurm.runner import SubprocessRunner

    world(session_factory)
    # (flap_window_s=0: counting heals alone; returning within a day would be flapping first)
    policy = acting(
        validation_command=["true"],
        return_after_quiet_s=0,
        flap_window_s=0,
        breaker_max_fraction=1.0,
    )
    ctx = context(session_factory, policy, {"kubernetes": actor(api)}, runner=SubprocessRunner())
    for i in range(3):  # fails, is validated and returned, fails again...
        bus = f"0000:{0x40 + i}:00"
        fault(session_factory, XID79, node="gpu-node-08", ts=time.time(), bus=bus)
        heal(ctx, passes=3)
    drains = by_kind(session_factory)["drain"]
    assert len(drains) == 3 and "contact support" in drains[-1].result["support"]
    with session_factory() as s:
        (held,) = service.held_nodes(s)
        alerts = [n for n in service.list_notices(s) if "needs support" in n.subject]
    assert held.node == "gpu-node-08" and held.support and len(alerts) == 1
    assert len(by_kind(session_factory)["return"]) == 2  # the third time: no return planned


def _hf_checkpoints(root: Path, *steps: int) -> None:
    for step in steps:
        d = root / f"checkpoint-{step}"
        d.mkdir(parents=True)
        (d / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    old = time.time() - 120
    for p in root.rglob("*"):
        os.utime(p, (old, old))


def _posted_env(fake: FakeKubeAPI) -> dict[str, str]:
    (body,) = [b for m, _, b in fake.writes if m == "POST"]
    container = body["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_checkpoint_dir_from_the_accounts_pattern_when_the_job_names_none(
    api: FakeKubeAPI, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    pod = fixture("pod_job_running.json")
    pod["spec"]["containers"][0]["env"] = []  # the pod names no checkpoint directory
    api.apply("pods", pod)
    _hf_checkpoints(tmp_path / "ml-research" / POD.split("/")[1], 100, 200)
    now = world(session_factory)
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    policy = acting(checkpoint_patterns={"ml-*": f"{tmp_path}/{{account}}/{{job_name}}"})
    heal(context(session_factory, policy, {"kubernetes": actor(api)}))
    (rec,) = by_kind(session_factory)["recover"]
    assert (rec.params["checkpoint_source"], rec.params["step"]) == ("pattern", 200)
    ckpt = str(tmp_path / "ml-research" / POD.split("/")[1] / "checkpoint-200")
    assert _posted_env(api)["FLEETMEDIC_RESUME_FROM"] == ckpt


def test_a_job_patch_names_the_checkpoint_dir_first(
    api: FakeKubeAPI, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    from timeline.models import JobPatch

    _hf_checkpoints(tmp_path / "patched", 300)
    now = world(session_factory)
    append(
        session_factory,
        job_patches=[
            JobPatch(
                job_id=POD, checkpoint_dir=str(tmp_path / "patched"), wandb_run="team/llm/run-abc1"
            )
        ],
    )
    fault(session_factory, XID79, node="gpu-node-07", ts=now)
    heal(context(session_factory, acting(), {"kubernetes": actor(api)}))
    (rec,) = by_kind(session_factory)["recover"]
    # The pod's own FLEETMEDIC_CHECKPOINT_DIR (/shared/ckpt/llama-7b) comes after the patch.
    assert rec.params["checkpoint_dirs"][0] == ["job_patch", str(tmp_path / "patched")]
    assert rec.params["checkpoint_dirs"][1] == ["pod_env", "/shared/ckpt/llama-7b"]
    env = _posted_env(api)
    assert env["FLEETMEDIC_RESUME_FROM"] == str(tmp_path / "patched" / "checkpoint-300")
    assert (env["WANDB_RUN_ID"], env["WANDB_RESUME"]) == ("run-abc1", "allow")
