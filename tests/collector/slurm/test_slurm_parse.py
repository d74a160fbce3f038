"""Parsers of real Slurm 22.05 output (tests/fixtures/slurm/, recorded on a real cluster)."""

from __future__ import annotations

import time

import pytest

from collector.slurm.hostlist import (
    HostlistError,
    expand_hostlist,
    gpu_count_from_tres,
    gpu_indices_from_gres,
    parse_tres,
)
from collector.slurm.parse import ParseError, parse_sacct_json, parse_sacct_psv, parse_slurm_time
from collector.slurm.scontrol import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_squeue_gres,
    split_node_reason,
)
from tests.collector.slurm.recorded import read

pytestmark = pytest.mark.usefixtures("utc")


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node[1-3,5]", ["node1", "node2", "node3", "node5"]),
        ("node[1,3]", ["node1", "node3"]),
        ("gpu-[08-10]", ["gpu-08", "gpu-09", "gpu-10"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("a1,b[2-3],c", ["a1", "b2", "b3", "c"]),
        ("node1", ["node1"]),
        ("", []),
        ("(null)", []),
        ("None assigned", []),  # sacct for a pending job
    ],
)
def test_expand_hostlist_handles_ranges_padding_and_products(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["node[1-3", "node1]", "node[3-1]", "node[a-b]", "n[1-999999999]"])
def test_expand_hostlist_rejects_malformed_or_huge_lists(bad: str) -> None:
    with pytest.raises(HostlistError):
        expand_hostlist(bad)


@pytest.mark.parametrize(
    ("gres", "idx"),
    [
        ("gpu:2(IDX:0-1)", [0, 1]),
        ("gpu:4(IDX:2,4-6)", [2, 4, 5, 6]),
        ("gpu:a100:2(IDX:0,3)", [0, 3]),
        ("gpu:2", None),  # GPUs without IDX: nothing to attribute
        ("", []),
        ("gpu:0", None),
    ],
)
def test_gpu_indices_from_gres_reads_idx_lists(gres: str, idx: list[int] | None) -> None:
    assert gpu_indices_from_gres(gres) == idx


def test_tres_gpu_count_prefers_untyped_and_sums_typed() -> None:
    assert gpu_count_from_tres(parse_tres("billing=1,cpu=1,gres/gpu=2,node=1")) == 2
    assert gpu_count_from_tres(parse_tres("cpu=2,gres/gpu:a100=2,gres/gpu:h100=4")) == 6
    assert gpu_count_from_tres(parse_tres("cpu=1,node=1")) is None


def test_sacct_json_keeps_requeue_record_and_has_the_zero_exit_code_bug() -> None:
    records, bad = parse_sacct_json(read("sacct.json"))
    assert bad == []
    by_id: dict[str, list[str]] = {}
    for r in records:
        by_id.setdefault(r.job_id, []).append(r.state)
    assert by_id["6"] == ["REQUEUED", "COMPLETED"]
    fail = next(r for r in records if r.job_id == "3")
    assert fail.state == "FAILED"
    # 22.05 JSON never carries the return code: neither job nor steps say 1.
    assert fail.step_rc is None
    timeout = next(r for r in records if r.job_id == "4")
    assert (timeout.state, timeout.step_signal, timeout.gpus) == ("TIMEOUT", 15, 1)
    assert timeout.end_ts == 1795349795.0 and timeout.start_ts == 1795349706.0
    assert next(r for r in records if r.job_id == "7").gpus == 8


def test_sacct_psv_gives_real_exit_codes_and_normalized_states() -> None:
    rows, bad = parse_sacct_psv(read("sacct.psv"))
    assert bad == []
    jobs = {r.job_id: r for r in rows if r.step is None}
    assert (jobs["3"].state, jobs["3"].exit_code, jobs["3"].signal) == ("FAILED", 1, 0)
    assert jobs["5"].state == "CANCELLED"  # "CANCELLED by 0"
    step = next(r for r in rows if r.job_id == "4" and r.step == "batch")
    assert (step.state, step.signal) == ("CANCELLED", 15)
    assert jobs["1"].start_ts == parse_slurm_time("2026-11-22T12:15:06") == 1795349706.0


def test_sacct_psv_with_duplicates_lists_each_run_of_a_requeued_job() -> None:
    rows, _ = parse_sacct_psv(read("sacct_duplicates.psv"))
    assert [r.state for r in rows if r.job_id == "6"] == ["REQUEUED", "COMPLETED"]


def test_sacct_psv_reports_lines_with_wrong_cell_count() -> None:
    rows, bad = parse_sacct_psv("JobID|State|ExitCode\n1|COMPLETED|0:0\n2|FAILED\n")
    assert [r.job_id for r in rows] == ["1"]
    assert len(bad) == 1


@pytest.mark.parametrize(
    "garbage", ['{"meta": {}, "jobs": [', "<html>502</html>", '{"jobs": 3}', ""]
)
def test_sacct_json_garbage_raises_parse_error(garbage: str) -> None:
    with pytest.raises(ParseError):
        parse_sacct_json(garbage)


def test_scontrol_show_job_d_gives_gpu_idx_and_log_paths_while_running() -> None:
    jobs, bad = parse_scontrol_jobs(read("scontrol_show_job_d_running.txt"))
    assert bad == []
    by_id = {j.job_id: j for j in jobs}
    assert {k: j.gpu_idx for k, j in by_id.items()} == {
        "1": {"node1": [0, 1]},
        "4": {"node1": [3]},
        "5": {"node1": [4, 5]},
        "6": {"node2": [0, 1, 2, 3]},
    }
    assert by_id["1"].stdout == "/tmp/slurm-sandbox/jobs/gpu2-1.out"
    assert by_id["1"].state == "RUNNING" and by_id["1"].start_ts == 1795349706.0


def test_scontrol_show_job_after_completion_has_no_idx() -> None:
    jobs, _ = parse_scontrol_jobs(read("scontrol_show_job.txt"))
    assert jobs and all(j.gpu_idx == {} for j in jobs)
    assert {j.job_id: j.state for j in jobs}["3"] == "FAILED"


def test_scontrol_requeued_job_reports_restarts_and_new_idx() -> None:
    after, _ = parse_scontrol_jobs(read("scontrol_show_job_after_requeue.txt"))
    assert [(j.state, j.restarts, j.reason) for j in after] == [
        ("COMPLETING", 1, None),
        ("PENDING", 1, "BeginTime"),
    ]
    (rerun,) = parse_scontrol_jobs(read("scontrol_show_job_requeued_running.txt"))[0]
    assert rerun.gpu_idx == {"node1": [2, 4, 5, 6]} and rerun.restarts == 1


def test_multinode_gres_lines_expand_to_every_node() -> None:
    jobs, _ = parse_scontrol_jobs(read("scontrol_show_job_d_multinode.txt"))
    by_id = {j.job_id: j for j in jobs}
    assert by_id["1"].nodes == ["node1", "node2"]
    assert by_id["1"].gpu_idx == {"node1": [0, 1, 2], "node2": [0, 1, 2]}
    assert by_id["3"].gpu_idx == {"node1": [5, 6], "node3": [0, 1]}


def test_squeue_json_gres_detail_matches_scontrol() -> None:
    from_squeue = parse_squeue_gres(read("squeue_multinode.json"))
    jobs, _ = parse_scontrol_jobs(read("scontrol_show_job_d_multinode.txt"))
    assert from_squeue == {j.job_id: j.gpu_idx for j in jobs}
    assert parse_squeue_gres(read("squeue_running.json"))["6"] == {"node2": [0, 1, 2, 3]}


def test_scontrol_garbage_raises_and_no_jobs_is_empty() -> None:
    with pytest.raises(ParseError):
        parse_scontrol_jobs("slurm_load_jobs error: Unable to contact slurm controller")
    assert parse_scontrol_jobs("No jobs in the system\n") == ([], [])


def test_drained_node_reason_user_and_time() -> None:
    (node,) = parse_scontrol_nodes(read("scontrol_show_node_drained.txt"))[0]
    assert (node.name, node.state, node.base_state, node.flags) == (
        "node2",
        "MIXED+DRAIN",
        "MIXED",
        ["DRAIN"],
    )
    assert (node.reason, node.reason_user) == ("xid 79", "root")
    assert node.reason_ts == parse_slurm_time("2026-11-22T12:15:08")
    assert (node.gpus, node.gpus_alloc) == (8, 4)


def test_idle_nodes_have_no_reason() -> None:
    nodes, bad = parse_scontrol_nodes(read("scontrol_show_node.txt"))
    assert bad == [] and [n.name for n in nodes] == ["node1", "node2", "node3"]
    assert all(n.state == "IDLE" and n.reason is None and n.gpus == 8 for n in nodes)


def test_node_reason_without_user_suffix_is_kept_whole() -> None:
    assert split_node_reason("Not responding") == ("Not responding", None, None)
    assert split_node_reason("a=b [slurm@2026-11-22T12:00:00]")[:2] == ("a=b", "slurm")


@pytest.mark.parametrize("unit", [" ", "\t", "[", "a ", ", ", "="])
def test_hostile_20k_node_reason_is_kept_whole_without_hanging(unit: str) -> None:
    # Reason is free text; the old backtracking regex took seconds on 20k blanks or '['.
    text = unit * (20_000 // len(unit)) + "x"
    started = time.perf_counter()
    assert split_node_reason(text) == (text, None, None)
    (node,), bad = parse_scontrol_nodes(f"NodeName=n1 State=IDLE\n   Reason={text}\n")
    assert bad == [] and (node.reason, node.reason_user) == (text, None)
    assert time.perf_counter() - started < 2.0  # generous: the point is not hanging


def test_user_suffix_is_split_off_a_reason_padded_with_20k_blanks() -> None:
    blanks = " \t" * 10_000
    text = "xid 79" + blanks + "[root@2026-11-22T12:15:08]" + blanks
    reason, user, ts = split_node_reason(text)
    assert (reason, user) == ("xid 79", "root") and ts is not None


def test_down_node_and_not_responding_node_states() -> None:
    (down,) = parse_scontrol_nodes(read("scontrol_show_node_down.txt"))[0]
    assert (down.state, down.base_state, down.reason, down.reason_user) == (
        "DOWN",
        "DOWN",
        "fleetmedic test: down",
        "root",
    )
    nodes = {
        n.name: n for n in parse_scontrol_nodes(read("scontrol_show_node_not_responding.txt"))[0]
    }
    assert (nodes["node3"].base_state, nodes["node3"].flags) == ("IDLE", ["NOT_RESPONDING"])
    assert nodes["node1"].flags == []


def test_a_job_name_or_user_with_control_characters_is_cleaned_not_dropped() -> None:
    # A user names a job as they like; refused, the job would vanish from the fleet view.
    text = read("sacct.json").replace('"name": "requeue-me"', '"name": "\\u0000\\u001b[31mhide"')
    records, bad = parse_sacct_json(text)
    assert bad == [] and records
    named = [r for r in records if r.name and r.name.startswith("hide")]
    assert named and all(r.name == "hide" for r in named)  # both runs of the requeued job
