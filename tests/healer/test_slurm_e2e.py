"""End to end on a real Slurm 22.05 cluster with Slurm's default timing: a real `fleetmedic
serve` (Slurm + W&B sources, correlator, healer acting) and one real `fleetmedic agent` per
node following a kernel-log file. A real-format Xid line is appended to a node's file; the
node must be drained with our reason and the training job must run again elsewhere, resuming at
the checkpoint's step with the same W&B run (a real offline wandb run)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks._slurm_stack import Stack, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.slow]

POLICY = 'breaker_max_nodes = 10\nbreaker_max_fraction = 1.0\n[[act]]\ncluster = "*"\n'
_RESUMED = re.compile(r"resumed from step (\d+) at (\S+)")
_RUN = re.compile(r"wandb run (\S+)")


@pytest.fixture(scope="module")
def stack(healer_cluster: tuple[Path, str]) -> Iterator[Stack]:
    root, conf = healer_cluster
    # A folder of its own, not pytest's tmp_path: jobs and the server write here for minutes.
    work = Path(tempfile.mkdtemp(prefix="fm-heal-e2e-"))
    st = Stack(work, cluster_root=root, slurm_conf=conf, policy=POLICY)
    st.reset()
    st.start()
    yield st
    st.stop()
    st.reset()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def ckpt(stack: Stack, request: pytest.FixtureRequest) -> Path:
    """A checkpoint directory for this test's job."""
    return stack.work / "ckpt" / request.node.name


@pytest.fixture(autouse=True)
def _clean(stack: Stack) -> Iterator[None]:
    stack.set_policy(POLICY)
    stack.reset()
    (stack.bin_dir / "calls.log").unlink(missing_ok=True)  # each test counts its own calls
    yield


def _training(
    stack: Stack, name: str, ckpt: Path, *sbatch: str, export_dir: bool = False, config_dir: int = 1
) -> tuple[str, list[str]]:
    """Submit a checkpointing job and wait until it trains, has checkpoints, and the server
    holds it (running, with its W&B run linked)."""
    script = stack.train_script(ckpt, export_dir=export_dir, config_dir=config_dir)
    jid = stack.sbatch(name, *sbatch, script=script)
    wait_for(lambda: stack.job(jid).get("JobState") == "RUNNING", f"job {jid} running", 90)
    wait_for(lambda: (ckpt / "checkpoint-10").is_dir(), "a first complete checkpoint", 120)
    wait_for(lambda: stack.known_running(jid), "the server stored the running job", 60)
    wait_for(lambda: stack.api(f"/api/v1/jobs/{jid}").get("wandb_run"), "W&B run linked", 90)
    nodes = stack.slurm("scontrol", "show", "hostnames", stack.job(jid)["NodeList"]).split()
    return jid, nodes


def _drained_by_us(stack: Stack, node: str) -> str:
    state, reason = stack.node(node)
    return reason if "DRAIN" in state and reason.startswith("fleetmedic:") else ""


def _resumed(stack: Stack, name: str, job_id: str) -> tuple[int, str] | None:
    out = stack.output(name, job_id)
    m = _RESUMED.search(out)
    if m is None or f"step {int(m.group(1)) + 1}" not in out[m.end() :]:
        return None  # not yet trained one step after resuming
    return int(m.group(1)), m.group(2)


def test_single_node_job_is_requeued_off_the_bad_node_and_resumes_at_its_checkpoint(
    stack: Stack, ckpt: Path
) -> None:
    jid, (node_a,) = _training(
        stack, "single", ckpt, "--requeue", "--gres=gpu:1", f"--comment=checkpoint_dir={ckpt}"
    )
    run_id = _RUN.search(stack.output("single", jid)).group(1)  # type: ignore[union-attr]
    stack.xid(node_a, 79, "0000:3b:00")
    try:
        reason = wait_for(lambda: _drained_by_us(stack, node_a), f"{node_a} drained by us", 60)
        wait_for(
            lambda: (
                stack.job(jid).get("Restarts") == "1"
                and stack.job(jid).get("JobState") == "RUNNING"
                and stack.job(jid).get("NodeList") != node_a
            ),
            "job running elsewhere",
            90,
        )
        step, path = wait_for(lambda: _resumed(stack, "single", jid), "resumed and trained", 90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.dump()}") from None
    assert re.fullmatch(r"fleetmedic: gpu_hardware Xid 79 \[incident \d+\] \[root@\S+\]", reason)
    (recover,) = stack.actions(kind="recover", job_id=jid)
    assert recover["state"] == "done" and recover["result"]["how"] == "requeue"
    assert recover["params"]["step"] == step and recover["params"]["checkpoint"] == path
    assert recover["params"]["checkpoint_source"] == "wandb_config"  # the run's config said
    assert path == str(ckpt / f"checkpoint-{step}") and step >= 10
    # The rerun (its output file starts over) continues the same W&B run: two offline run
    # directories with that one id, one per run.
    assert _RUN.findall(stack.output("single", jid))[-1] == run_id
    assert [
        d.name.split("-")[-1]
        for d in sorted((stack.wandb_dir / "wandb").glob(f"offline-run-*-{run_id}"))
    ] == [run_id, run_id]
    assert len(stack.calls(r"scontrol requeue ")) == 1
    lineage = stack.api(f"/api/v1/jobs/{jid}/lineage")
    assert [(x["how"], x["step"]) for x in lineage] == [("requeue", step)]


def test_multi_node_job_is_resubmitted_as_one_gang_away_from_the_bad_node(
    stack: Stack, ckpt: Path
) -> None:
    jid, nodes = _training(
        stack,
        "gang",
        ckpt,
        "--no-requeue",
        "-N",
        "2",
        "--gres=gpu:1",
        export_dir=True,
        config_dir=0,
    )
    bad = nodes[1]  # not the batch host: the whole gang must still move
    run_id = _RUN.search(stack.output("gang", jid)).group(1)  # type: ignore[union-attr]
    stack.xid(bad, 79, "0000:5d:00")
    try:
        wait_for(lambda: _drained_by_us(stack, bad), f"{bad} drained by us", 60)
        lineage = wait_for(lambda: stack.api(f"/api/v1/jobs/{jid}/lineage"), "resubmitted", 90)
        new = lineage[0]["new_job_id"]
        wait_for(lambda: stack.job(new).get("JobState") == "RUNNING", f"job {new} running", 90)
        step, path = wait_for(lambda: _resumed(stack, "gang", new), "resumed and trained", 90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.dump()}") from None
    placed = stack.slurm("scontrol", "show", "hostnames", stack.job(new)["NodeList"]).split()
    assert len(placed) == 2 and bad not in placed
    assert stack.job(jid).get("JobState") == "CANCELLED"  # the old gang is gone, all of it
    (recover,) = stack.actions(kind="recover", job_id=jid)
    assert recover["result"]["how"] == "resubmit" and recover["params"]["step"] == step
    assert recover["params"]["checkpoint_source"] == "batch_script"
    assert recover["params"]["env"]["WANDB_RUN_ID"] == run_id
    assert _RUN.findall(stack.output("gang", new)) == [run_id]
    assert path == recover["params"]["checkpoint"]
    (submit,) = stack.calls(r"sbatch ")
    assert f"--exclude={bad}" in submit and "--nodes=2" in submit


def test_a_users_xid_31_drains_nothing_and_tells_the_owner(stack: Stack, ckpt: Path) -> None:
    jid, (node,) = _training(
        stack, "user-bug", ckpt, "--requeue", "--gres=gpu:1", f"--comment=checkpoint_dir={ckpt}"
    )
    stack.xid(node, 31, "0000:9a:00")
    notices = wait_for(
        lambda: [n for n in stack.api("/api/v1/healer/notices") if n["job_id"] == jid],
        "the owner told",
        60,
    )
    assert [(n["kind"], n["recipient"]) for n in notices] == [("owner", "root")]
    assert "no node was touched" in notices[0]["body"]
    assert not _drained_by_us(stack, node)
    assert not stack.calls(r"scontrol update nodename") and not stack.calls(r"requeue")
    incident = notices[0]["incident_id"]
    assert {a["kind"] for a in stack.actions(incident_id=incident)} == {"notify"}


def test_sigkill_of_the_server_mid_requeue_requeues_exactly_once(stack: Stack, ckpt: Path) -> None:
    jid, (node,) = _training(
        stack,
        "killed",
        ckpt,
        "--requeue",
        "--gres=gpu:1",
        f"--comment=checkpoint_dir={ckpt}",
        config_dir=0,
    )
    pause = stack.bin_dir / "pause-scontrol-requeue"
    pause.touch()  # the wrapper sleeps right after the real requeue returns
    paused = stack.bin_dir / "paused-scontrol-requeue"
    try:
        stack.xid(node, 79, "0000:18:00")
        wait_for(paused.exists, "the requeue ran and the server waits on it", 90)
        stack.kill_server(signal.SIGKILL)  # mid-action: requeued, not yet recorded as done
        pause.unlink()
        os.kill(int(paused.read_text()), signal.SIGKILL)  # the orphaned wrapper's sleep
        paused.unlink()
        (mid,) = _actions_in_db(stack, kind="recover", job_id=jid)
        assert mid == "running"  # the store says: acting, not done
        stack.start_server()
        wait_for(
            lambda: (
                stack.job(jid).get("JobState") == "RUNNING"
                and stack.job(jid).get("NodeList") != node
            ),
            "running elsewhere",
            90,
        )
        recover = wait_for(
            lambda: [a for a in stack.actions(kind="recover", job_id=jid) if a["state"] == "done"],
            "recovery done",
            60,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.dump()}") from None
    finally:
        pause.unlink(missing_ok=True)
    assert len(stack.calls(r"scontrol requeue ")) == 1  # exactly once across the SIGKILL
    assert stack.job(jid)["Restarts"] == "1"
    assert recover[0]["params"]["checkpoint_source"] == "comment"
    audit = stack.api(f"/api/v1/actions/{recover[0]['id']}")["audit"]
    notes = [e["output"] for e in audit if e["what"] == "note"]
    assert any("already requeued" in n for n in notes)


def _actions_in_db(stack: Stack, *, kind: str, job_id: str) -> list[str]:
    """States of a job's actions of one kind, straight from the server's database (while the
    server is down)."""
    import sqlite3

    with sqlite3.connect(stack.work / "server.db") as conn:
        sql = "select state from healer_actions where kind = ? and job_id = ? order by id"
        return [r[0] for r in conn.execute(sql, (kind, job_id))]
