"""SlurmSource fed with recorded output of a real Slurm 22.05 cluster (tests/fixtures/slurm/)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from collector.base import Observations
from collector.health import SourceHealth
from collector.slurm import RecordedRunner, SlurmSource, build_slurm_source
from collector.slurm.runner import CommandResult, SubprocessRunner
from timeline import queries, service
from timeline.models import Batch, EventKind, Severity
from timeline.settings import Settings

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "slurm"
T0 = 1795349800.0  # after every recorded job ended


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The recorded cluster ran in UTC; Slurm prints local time."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def read(name: str) -> str:
    return (FIX / name).read_text()


def recorded(ctl: str = "scontrol_show_job_d_running.txt", node: str = "scontrol_show_node.txt"):
    return RecordedRunner(
        {
            "sacct --json": read("sacct.json"),
            "sacct -P": read("sacct_duplicates.psv"),
            "scontrol show job": read(ctl),
            "scontrol show node": read(node),
        }
    )


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(runner: RecordedRunner, t: float = T0) -> tuple[SlurmSource, Clock]:
    clock = Clock(t)
    return SlurmSource(runner, clock, cluster="lab", lookback_s=3600, overlap_s=300), clock


def test_jobs_carry_state_exit_code_signal_nodes_gpus_and_log_paths() -> None:
    src, _ = make(recorded())
    jobs = {j.job_id: j for j in src.collect().jobs}
    table = {k: (j.state, j.exit_code, j.signal, j.nodes, j.gpus) for k, j in jobs.items()}
    assert table == {
        "1": ("COMPLETED", 0, None, ["node1"], 2),
        "2": ("COMPLETED", 0, None, ["node1"], None),
        "3": ("FAILED", 1, None, ["node1"], 1),  # from sacct -P: the JSON says 0
        "4": ("TIMEOUT", 0, 15, ["node1"], 1),  # signal from the batch step
        "5": ("CANCELLED", 0, None, ["node1"], 2),
        "6": ("COMPLETED", 0, None, ["node1"], 4),
        "7": ("COMPLETED", 0, None, ["node3"], 8),
    }
    assert jobs["3"].payload["exit_code_from"] == "sacct -P"
    assert jobs["1"].payload["stdout"] == "/tmp/slurm-sandbox/jobs/gpu2-1.out"
    assert (jobs["4"].start_ts, jobs["4"].end_ts) == (1795349706.0, 1795349795.0)
    assert all(j.cluster == "lab" and j.user == "root" for j in jobs.values())


def test_requeued_job_counts_restarts_and_keeps_the_earlier_run() -> None:
    src, _ = make(recorded())
    job = next(j for j in src.collect().jobs if j.job_id == "6")
    assert job.restart_count == 1
    assert job.payload["requeues"] == [
        {"state": "REQUEUED", "start_ts": 1795349706.0, "end_ts": 1795349708.0, "nodes": ["node2"]}
    ]


def test_job_state_events_have_stable_dedup_keys_and_exit_codes() -> None:
    src, _ = make(recorded())
    events = [e for e in src.collect().events if e.kind == EventKind.JOB_STATE]
    keys = [e.dedup_key for e in events]
    assert len(keys) == len(set(keys))
    by_key = {e.dedup_key: e for e in events}
    assert {k for k in keys if k and k.startswith("lab:6:")} == {
        "lab:6:RUNNING:0",
        "lab:6:REQUEUED:0",
        "lab:6:RUNNING:1",
        "lab:6:COMPLETED:1",
    }
    failed = by_key["lab:3:FAILED:0"]
    assert (failed.code, failed.severity, failed.node, failed.ts) == (
        1,
        Severity.ERROR,
        "node1",
        1795349707.0,
    )
    assert by_key["lab:4:TIMEOUT:0"].payload["signal"] == 15
    assert by_key["lab:6:REQUEUED:0"].node == "node2"


def test_a_repeat_poll_sends_no_new_events_and_no_unchanged_jobs() -> None:
    src, clock = make(recorded())
    first = src.collect()
    clock.t += 30
    again = src.collect()
    assert first.jobs and first.events
    assert again.jobs == []
    assert [e for e in again.events if e.kind == EventKind.JOB_STATE] == []


def test_a_restarted_source_repeats_keys_so_the_store_keeps_each_event_once(
    session: Session,
) -> None:
    def store(obs: Observations) -> None:
        batch = Batch(
            agent="server:slurm",
            node="server:slurm",
            batch_id=uuid.uuid4().hex,
            events=obs.events,
            jobs=obs.jobs,
            allocations=obs.allocations,
            nodes=obs.nodes,
        )
        service.append_batch(session, batch=batch)

    store(make(recorded(node="scontrol_show_node_drained.txt"))[0].collect())
    n_events = queries.count_rows(session, table="events")
    store(make(recorded(node="scontrol_show_node_drained.txt"))[0].collect())  # a restart
    assert n_events == 17  # 16 job states + 1 drain
    assert queries.count_rows(session, table="events") == n_events
    assert queries.count_rows(session, table="jobs") == 7


def test_sacct_window_starts_at_lookback_then_at_high_water_mark_minus_overlap() -> None:
    runner = recorded()
    src, clock = make(runner)
    src.collect()
    clock.t = T0 + 60
    src.collect()
    starts = [c[c.index("-S") + 1] for c in runner.calls if c[:2] == ("sacct", "--json")]
    fmt = "%Y-%m-%dT%H:%M:%S"
    assert starts == [
        time.strftime(fmt, time.localtime(T0 - 3600)),
        time.strftime(fmt, time.localtime(T0 - 300)),
    ]


def test_failed_sacct_keeps_the_window_and_is_counted_not_raised() -> None:
    runner = recorded()
    health = SourceHealth("slurm-test")
    src = SlurmSource(runner, Clock(T0), cluster="lab", health=health, lookback_s=3600)
    runner.replies["sacct --json"] = CommandResult(("sacct",), None, "", "", True, "timeout")
    obs = src.collect()
    assert health.errors["sacct --json: timeout"] == 1
    assert obs.allocations  # scontrol still answered: GPUs of running jobs recorded
    assert {j.state for j in obs.jobs} == {"RUNNING"}  # from slurmctld's memory meanwhile
    runner.replies["sacct --json"] = read("sacct.json")
    src.collect()
    starts = [c[c.index("-S") + 1] for c in runner.calls if c[:2] == ("sacct", "--json")]
    assert starts[0] == starts[1]  # a failed read does not advance the window


@pytest.mark.parametrize(
    ("key", "reply", "counter"),
    [
        ("sacct --json", '{"meta": {"plugin": ', "sacct_json"),
        ("scontrol show job", "slurm_load_jobs error: Socket timed out", "scontrol_show_job"),
        ("scontrol show node", "<<garbage>>", "scontrol_show_node"),
    ],
)
def test_garbage_output_is_counted_and_the_rest_still_reported(
    key: str, reply: str, counter: str
) -> None:
    runner = recorded()
    runner.replies[key] = reply
    health = SourceHealth("slurm-test")
    obs = SlurmSource(runner, Clock(T0), cluster="lab", health=health).collect()
    assert health.parse_failures[counter] == 1
    assert obs.jobs  # from sacct, or from slurmctld's memory when sacct is garbled
    assert (len(obs.nodes) > 0) == (key != "scontrol show node")


def test_without_accounting_jobs_come_from_slurmctld_with_true_exit_codes() -> None:
    runner = recorded(ctl="scontrol_show_job.txt")
    runner.replies["sacct --json"] = CommandResult(
        ("sacct",), 1, "", "Slurm accounting storage is disabled", False, "exit_1"
    )
    obs = make(runner)[0].collect()
    jobs = {j.job_id: (j.state, j.exit_code, j.user, j.gpus, j.end_ts) for j in obs.jobs}
    assert jobs["3"] == ("FAILED", 1, "root", 1, 1795349707.0)
    assert jobs["4"][:2] == ("TIMEOUT", 0) and jobs["5"][0] == "CANCELLED"
    assert "lab:3:FAILED:0" in {e.dedup_key for e in obs.events}  # same keys as via sacct
    assert next(j for j in obs.jobs if j.job_id == "3").payload["exit_code_from"] == "scontrol"


def sacct_with(keep: Callable[[dict[str, Any]], bool]) -> str:
    """The recorded sacct --json with only the records `keep` accepts (a narrower window)."""
    doc = json.loads(read("sacct.json"))
    doc["jobs"] = [j for j in doc["jobs"] if keep(j)]
    return json.dumps(doc)


def job6_keys(obs: Observations) -> set[str]:
    return {e.dedup_key or "" for e in obs.events if e.job_id == "6"}


def test_requeue_seen_before_the_rerun_record_numbers_runs_consistently() -> None:
    runner = recorded(ctl="scontrol_show_job_after_requeue.txt")
    runner.replies["sacct --json"] = sacct_with(
        lambda j: j["job_id"] == 6 and j["state"]["current"] == "REQUEUED"
    )
    src, clock = make(runner)
    first = src.collect()
    assert job6_keys(first) == {"lab:6:RUNNING:0", "lab:6:REQUEUED:0"}
    assert next(j for j in first.jobs if j.job_id == "6").restart_count == 1
    runner.replies["sacct --json"] = read("sacct.json")
    clock.t += 30
    assert job6_keys(src.collect()) == {"lab:6:RUNNING:1", "lab:6:COMPLETED:1"}


def test_a_rerun_whose_first_run_left_the_window_keeps_its_run_number() -> None:
    runner = recorded(ctl="scontrol_show_job_requeued_running.txt")
    runner.replies["sacct --json"] = sacct_with(
        lambda j: j["job_id"] == 6 and j["state"]["current"] != "REQUEUED"
    )
    obs = make(runner)[0].collect()
    assert job6_keys(obs) == {"lab:6:RUNNING:1", "lab:6:COMPLETED:1"}


def test_nonzero_exit_is_counted() -> None:
    runner = recorded()
    runner.replies["scontrol show node"] = CommandResult(
        ("scontrol",),
        1,
        "",
        "slurm_load_node error: Unable to contact slurm controller",
        False,
        "exit_1",
    )
    health = SourceHealth("slurm-test")
    obs = SlurmSource(runner, Clock(T0), health=health).collect()
    assert health.errors["scontrol show node: exit_1"] == 1 and obs.nodes == [] and obs.jobs


def test_allocations_open_while_running_and_close_when_jobs_end_or_requeue() -> None:
    runner = recorded()
    src, clock = make(runner)
    opened = src.collect().allocations
    assert {(a.job_id, a.node, a.gpu_index) for a in opened} == {
        ("1", "node1", 0),
        ("1", "node1", 1),
        ("4", "node1", 3),
        ("5", "node1", 4),
        ("5", "node1", 5),
        ("6", "node2", 0),
        ("6", "node2", 1),
        ("6", "node2", 2),
        ("6", "node2", 3),
    }
    assert all(a.end_ts is None and a.start_ts == 1795349706.0 for a in opened)

    runner.replies["scontrol show job"] = read("scontrol_show_job_requeued_running.txt")
    clock.t += 30
    step = src.collect().allocations
    closed = {(a.job_id, a.node, a.gpu_index): a.end_ts for a in step if a.end_ts is not None}
    assert closed[("6", "node2", 0)] == 1795349708.0  # end of the REQUEUED run
    assert closed[("1", "node1", 1)] == 1795349737.0
    assert closed[("4", "node1", 3)] == 1795349795.0
    rerun = [a for a in step if a.end_ts is None]
    assert {(a.node, a.gpu_index, a.start_ts) for a in rerun} == {
        ("node1", i, 1795349714.0) for i in (2, 4, 5, 6)
    }

    runner.replies["scontrol show job"] = read("scontrol_show_job.txt")
    clock.t += 30
    final = src.collect().allocations
    assert {(a.gpu_index, a.end_ts) for a in final} == {(i, 1795349719.0) for i in (2, 4, 5, 6)}
    clock.t += 30
    assert src.collect().allocations == []


def test_multinode_job_records_gpu_indices_on_every_node() -> None:
    runner = recorded(ctl="scontrol_show_job_d_multinode.txt")
    allocs = make(runner)[0].collect().allocations
    got = {(a.node, a.gpu_index) for a in allocs if a.job_id == "3"}
    assert got == {("node1", 5), ("node1", 6), ("node3", 0), ("node3", 1)}


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


def live_replies(tag: str) -> dict[str, str]:
    """The exact commands SlurmSource runs, recorded by record_fixtures.py on a real cluster."""
    d = FIX / "live"
    return {
        "sacct --json": (d / f"{tag}_sacct_json.json").read_text(),
        "sacct -P": (d / f"{tag}_sacct_psv.txt").read_text(),
        "scontrol show job": (d / f"{tag}_scontrol_show_job_d.txt").read_text(),
        "scontrol show node": (d / f"{tag}_scontrol_show_node.txt").read_text(),
    }


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
