"""SlurmSource fed with recorded output of a real Slurm 22.05 cluster (tests/fixtures/slurm/)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.orm import Session

from collector.base import Observations
from collector.health import SourceHealth
from collector.slurm import SlurmSource
from collector.slurm.runner import CommandResult
from tests.collector.slurm.recorded import T0, Clock, make, read, recorded
from timeline import queries, service
from timeline.models import Batch, EventKind, Severity

pytestmark = pytest.mark.usefixtures("utc")


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
