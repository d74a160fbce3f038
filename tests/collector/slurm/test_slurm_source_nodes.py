"""SlurmSource on recorded node states and a recorded job scenario; its command runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.slurm import RecordedRunner, build_slurm_source
from collector.slurm.runner import SubprocessRunner
from tests.collector.slurm.recorded import live_replies, make, read, recorded
from timeline.models import EventKind, Severity
from timeline.settings import Settings

pytestmark = pytest.mark.usefixtures("utc")


def test_drained_node_reports_reason_user_time_and_one_event_per_change() -> None:
    runner = recorded(node="scontrol_show_node_drained.txt")
    src, clock = make(runner)
    obs = src.collect()
    (node,) = obs.nodes
    assert (node.state, node.reason, node.reason_user, node.unschedulable) == (
        "MIXED+DRAIN",
        "xid 79",
        "root",
        True,
    )
    (drain,) = [e for e in obs.events if e.kind == EventKind.NODE_STATE]
    assert drain.severity == Severity.WARNING and drain.node == "node2"
    assert drain.ts == node.reason_ts and drain.payload["reason_user"] == "root"
    clock.t += 30
    assert [e for e in src.collect().events if e.kind == EventKind.NODE_STATE] == []
    runner.replies["scontrol show node"] = read("scontrol_show_node.txt")
    clock.t += 30
    resumed = [e for e in src.collect().events if e.kind == EventKind.NODE_STATE]
    assert [(e.node, e.severity, e.payload["previous_condition"]) for e in resumed] == [
        ("node2", Severity.INFO, "DRAIN")
    ]


def test_healthy_nodes_on_first_sight_make_no_events() -> None:
    obs = make(recorded())[0].collect()
    assert [n.state for n in obs.nodes] == ["IDLE", "IDLE", "IDLE"]
    assert [e for e in obs.events if e.kind == EventKind.NODE_STATE] == []


def test_subprocess_runner_reports_timeout_missing_binary_and_exit_code(tmp_path: Path) -> None:
    runner = SubprocessRunner()
    assert runner(["sleep", "5"], 0.2).error == "timeout"
    assert runner(["fleetmedic-no-such-binary"], 1).error == "not_found"
    failed = runner(["sh", "-c", "echo oops >&2; exit 3"], 5)
    assert (failed.rc, failed.error, failed.stderr.strip()) == (3, "exit_3", "oops")
    script = tmp_path / "sacct"
    script.write_text('#!/bin/sh\necho "conf=$SLURM_CONF"\n')
    script.chmod(0o755)
    ok = SubprocessRunner(bin_dir=str(tmp_path), slurm_conf="/x/slurm.conf")(["sacct"], 5)
    assert ok.ok and ok.stdout.strip() == "conf=/x/slurm.conf"


def test_build_slurm_source_follows_settings() -> None:
    assert build_slurm_source(Settings(slurm_enabled=False)) is None
    src = build_slurm_source(Settings(slurm_enabled=True, slurm_cluster="lab", slurm_lookback_s=60))
    assert src is not None and src.cluster == "lab" and src.lookback_s == 60


def test_recorded_scenario_while_running_then_ended() -> None:
    runner = RecordedRunner(dict(live_replies("running")))
    src, clock = make(runner, t=1795351300.0)
    running = src.collect()
    jobs = {j.job_id: j for j in running.jobs}
    assert (jobs["3"].state, jobs["3"].exit_code) == ("FAILED", 3)
    assert (jobs["4"].state, jobs["4"].signal) == ("CANCELLED", 15)  # scancel: SIGTERM step
    assert (jobs["5"].state, jobs["5"].restart_count) == ("RUNNING", 1)
    assert jobs["6"].nodes == ["node2", "node3"] and jobs["6"].gpus == 6
    held = {(a.job_id, a.node, a.gpu_index) for a in running.allocations}
    assert {(n, i) for j, n, i in held if j == "6"} == {
        ("node2", 4),
        ("node2", 5),
        ("node2", 6),
        ("node3", 0),
        ("node3", 1),
        ("node3", 2),
    }
    (drain,) = [e for e in running.events if e.kind == EventKind.NODE_STATE]
    assert drain.payload["reason"] == "fleetmedic: xid 79" and drain.node == "node3"

    runner.replies.update(live_replies("ended"))
    clock.t += 60
    ended = src.collect()
    jobs = {j.job_id: j for j in ended.jobs}
    assert (jobs["1"].state, jobs["1"].signal) == ("TIMEOUT", 15)
    assert (jobs["5"].state, jobs["5"].restart_count, jobs["5"].exit_code) == ("COMPLETED", 1, 0)
    assert all(a.end_ts is not None for a in ended.allocations)
    assert {a.job_id for a in ended.allocations} == {"1", "5", "6"}
    assert {e.dedup_key for e in ended.events if e.kind == EventKind.JOB_STATE} == {
        "lab:1:TIMEOUT:0",
        "lab:5:COMPLETED:1",
        "lab:6:COMPLETED:0",
    }
    (resumed,) = [e for e in ended.events if e.kind == EventKind.NODE_STATE]
    assert resumed.severity == Severity.INFO and resumed.payload["condition"] == []


def test_down_and_not_responding_nodes_are_unschedulable_with_warning_events() -> None:
    runner = recorded(node="scontrol_show_node_not_responding.txt")
    src, clock = make(runner)
    obs = src.collect()
    assert {n.name: n.unschedulable for n in obs.nodes} == {
        "node1": False,
        "node2": False,
        "node3": True,
    }
    (nr,) = [e for e in obs.events if e.kind == EventKind.NODE_STATE]
    assert (nr.node, nr.severity, nr.payload["condition"]) == (
        "node3",
        Severity.WARNING,
        ["NOT_RESPONDING"],
    )
    runner.replies["scontrol show node"] = read("scontrol_show_node_down.txt")
    clock.t += 30
    (down,) = [e for e in src.collect().events if e.kind == EventKind.NODE_STATE]
    assert (down.node, down.payload["condition"], down.payload["reason"]) == (
        "node1",
        ["DOWN"],
        "fleetmedic test: down",
    )
