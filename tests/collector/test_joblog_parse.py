"""Job log parsing on real recorded output: CUDA errors, CUDA OOM, NCCL, elastic, Slurm."""

from __future__ import annotations

from pathlib import Path

from collector.parse.joblog import JobLogParser, parse_job_line, parse_job_text
from timeline.models import Event, EventKind

FIX = Path(__file__).parent.parent / "fixtures" / "joblog"


def _read(name: str) -> str:
    return (FIX / name).read_text()


def test_real_torch_cuda_oom_gives_sizes_and_gpu() -> None:
    (ev,) = parse_job_text(_read("h100_torch_cuda_oom.stderr"), node="n1", job_id="42", ts=5.0)
    assert ev.kind is EventKind.CUDA_OOM and ev.code == 2
    assert ev.payload["exception"] == "torch.OutOfMemoryError"
    assert ev.payload["tried"] == "200.00 GiB" and ev.payload["tried_bytes"] == 200 * 2**30
    assert ev.payload["gpu_index"] == 0 and ev.payload["total"] == "79.18 GiB"
    assert ev.payload["free"] == "78.66 GiB"
    assert (ev.node, ev.job_id, ev.ts) == ("n1", "42", 5.0)
    assert ev.raw is not None and ev.raw.startswith("torch.OutOfMemoryError: CUDA out of memory.")


def test_real_device_side_assert_gives_the_assert_and_the_error() -> None:
    events = parse_job_text(_read("h100_torch_device_assert.stderr"))
    by_msg = {e.message: e for e in events}
    assert all(e.kind is EventKind.CUDA_ERROR and e.code == 710 for e in events)
    assert "CUDA error: device-side assert triggered" in by_msg
    assertion = next(e for e in events if "file" in e.payload)
    assert assertion.payload["file"].endswith("IndexKernel.cu") and assertion.payload["line"] == 111
    assert "index out of bounds" in assertion.payload["assertion"]


def test_real_cupy_illegal_address_repeats_collapse_into_one_counted_event() -> None:
    events = parse_job_text(_read("h100_cupy_illegal_address.stderr"))
    assert len(events) == 1
    ev = events[0]
    assert ev.kind is EventKind.CUDA_ERROR and ev.code == 700
    assert ev.payload["error"] == "illegal_memory_access" and ev.count == 3


def test_line_with_nothing_we_track_gives_none() -> None:
    assert parse_job_line("epoch 3 step 1200 loss 2.31") is None
    assert parse_job_line("") is None


def test_chunked_feed_holds_childfailed_block_until_it_ends() -> None:
    parser = JobLogParser()
    head = parser.feed("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ")
    assert head == []  # the block is still open
    for line in [
        "=" * 60,
        "train.py FAILED",
        "-" * 60,
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "-" * 60,
        "Root Cause (first observed failure):",
        "[0]:",
        "  host      : node9",
        "  rank      : 5 (local_rank: 1)",
        "  exitcode  : -9 (pid: 777)",
        "  traceback : Signal 9 (SIGKILL) received by PID 777",
        "=" * 60,
    ]:
        assert parser.feed(line) == []
    (ev,) = parser.feed("next line") + parser.flush()
    assert ev.kind is EventKind.CHILD_FAILED and ev.code == -9
    assert (ev.payload["host"], ev.payload["rank"], ev.payload["local_rank"]) == ("node9", 5, 1)
    assert ev.payload["signal"] == 9 and ev.payload["signal_name"] == "SIGKILL"
    assert ev.payload["pid"] == 777


def test_real_torch2_watchdog_lines_give_op_seq_numel_timeout_rank() -> None:
    events = parse_job_text(_read("llamafactory7396_watchdog.log"))
    timeouts = [e for e in events if "op_type" in e.payload]
    assert {e.payload["rank"] for e in timeouts} == {0, 4}
    r0 = next(e for e in timeouts if e.payload["rank"] == 0)
    assert (r0.payload["op_type"], r0.payload["seq_num"]) == ("ALLREDUCE", 1580)
    assert r0.payload["numel_in"] == 466119168 and r0.payload["timeout_ms"] == 600000
    assert r0.payload["ran_for_ms"] == 600060
    last = [e for e in events if "last_enqueued" in e.payload]
    assert {(e.payload["last_enqueued"], e.payload["last_completed"]) for e in last} == {
        (1582, 1579)
    }


def test_real_watchdog_with_pg_guid_and_timeout_at_work() -> None:
    events = parse_job_text(_read("diffsynth458_watchdog_pg_guid.log"))
    assert all(e.kind is EventKind.NCCL_TIMEOUT for e in events)
    first = next(e for e in events if "op_type" in e.payload)
    assert first.payload["op_type"] == "COALESCED" and first.payload["numel_out"] == 450560
    pg = next(e for e in events if e.payload.get("pg_id"))
    assert pg.payload["pg_id"] == "2" and pg.payload["rank"] == 4


def test_real_old_format_watchdog_without_numel() -> None:
    events = parse_job_text(_read("pytorch118369_watchdog_old_format.log"))
    seqs = sorted(e.payload["seq_num"] for e in events)
    assert seqs == [64088, 96117, 96120, 96125]  # the repeated 96125 line is counted, not lost
    assert sum(e.count for e in events) == 5
    assert all("numel_in" not in e.payload for e in events)


def test_real_net_ib_completion_errors_give_status_vendor_err_peer() -> None:
    events = parse_job_text(_read("nccl1814_net_ib_status.log"))
    assert [e.code for e in events] == [12, 5]
    first = events[0]
    assert first.kind is EventKind.NCCL_ERROR
    assert (first.payload["peer"], first.payload["peer_port"]) == ("172.36.143.59", 44206)
    assert first.payload["vendor_err"] == 129 and first.payload["host"] == "hostname-test"
    assert first.payload["cuda_dev"] == 4 and first.payload["src"] == "ib_plugin.c:1615"
    old = parse_job_text(_read("nccl928_net_ib_error4.log"))
    assert [e.code for e in old] == [4, 4]
    assert old[0].payload["peer"] == "fe80::966d:ae03:8b:df78%ib0"


def test_real_childfailed_block_gives_root_cause() -> None:
    (ev,) = parse_job_text(_read("cppo6_childfailed_sigkill.log"))
    assert ev.kind is EventKind.CHILD_FAILED and ev.code == -9
    assert ev.payload["script"] == "src/open_r1/grpo_gsm.py"
    assert ev.payload["host"].startswith("mlxlab115rp2n7682d40d9")
    assert ev.payload["signal"] == 9 and ev.payload["failures"] == []


def test_real_truncated_childfailed_block_keeps_the_failures_it_saw() -> None:
    (ev,) = parse_job_text(_read("speculators1115_childfailed_truncated.log"))
    assert [f["rank"] for f in ev.payload["failures"]] == [3, 0, 2]
    assert ev.payload["failures"][2]["signal_name"] == "SIGTERM"
    assert ev.payload["rank"] == 1 and ev.payload["local_rank"] == 1  # the partial root cause


def test_real_elastic_failed_lines() -> None:
    events = parse_job_text(_read("elastic_failed_lines.log"))
    assert [(e.code, e.payload["local_rank"]) for e in events] == [(-9, 5), (-9, 3)]
    assert events[1].payload["pid"] == 812917 and events[1].payload["signal"] == 9


def test_real_slurm_oom_and_cancel_lines() -> None:
    events = parse_job_text(_read("slurm_tusas149_oom_stepid.log"))
    kinds = [(e.kind, e.job_id) for e in events]
    assert (EventKind.HOST_OOM, "440575") in kinds
    srun = next(e for e in events if e.payload.get("outcome") == "Out Of Memory")
    assert srun.node == "nid001277" and srun.payload["tasks"] == "1-3"
    cancel = next(e for e in events if e.kind is EventKind.JOB_STATE)
    assert cancel.payload["scope"] == "step" and "reason" not in cancel.payload
    old = parse_job_text(_read("slurm_hafs101_oom_step_cancel.log"))
    assert next(e for e in old if e.payload.get("stage") == "slurmstepd").job_id == "3495064"


def test_real_slurm_time_limit_lines() -> None:
    events = parse_job_text(_read("slurm_zetta671_time_limit.log"))
    assert {(e.payload["scope"], e.payload["reason"]) for e in events} == {
        ("job", "TIME LIMIT"),
        ("step", "TIME LIMIT"),
    }
    assert all(e.job_id == "494583" for e in events)
    (old,) = parse_job_text(_read("slurm_canu1067_old_cancel.log"))
    assert (old.job_id, old.payload["reason"], old.node) == ("830329", "TIME LIMIT", "n447")
    term = parse_job_text(_read("slurm_desitarget628_terminated.log"))
    assert sum(1 for e in term if e.payload.get("outcome") == "Terminated") == 3


def test_real_unhandled_cuda_error_with_rank_prefix_and_last_error() -> None:
    events = parse_job_text(_read("nccl1410_unhandled_cuda_error.log"))
    assert [(e.kind, e.code) for e in events] == [(EventKind.NCCL_ERROR, 1)] * 2
    dist, nccl = events
    assert dist.payload["nccl_version"] == "2.20.5" and dist.payload["rank"] == 7
    assert dist.payload["exception"] == "torch.distributed.DistBackendError"
    assert nccl.payload["last_error"] == "Cuda failure 1 'invalid argument'"


def test_real_unhandled_system_error_old_and_new_wording() -> None:
    old = parse_job_text(_read("nccl_unhandled_system_error.log"))
    assert [e.code for e in old] == [2, 2] and old[0].payload["nccl_version"] == "2.7.8"
    (new,) = parse_job_text(_read("nccl875_unhandled_system_error_2_10.log"))
    assert new.payload["error"] == "unhandled system error"
    assert new.payload["where"].endswith("ProcessGroupNCCL.cpp:1191")


def test_real_socket_warnings_name_the_peer_and_the_reason() -> None:
    (ev,) = parse_job_text(_read("sglang5594_socket_abort.log"))
    assert (ev.payload["peer"], ev.payload["peer_port"]) == ("10.0.0.82", 38455)
    assert ev.payload["socket_error"] == "Software caused connection abort"
    assert ev.payload["host"] == "h100-15" and ev.payload["cuda_dev"] == 7
    (v6,) = parse_job_text(_read("nccl975_socket_connect.log"))
    assert v6.payload["peer"] == "fe80::966d:ae03:a2:8cf0%ib1"


def test_real_uncorrectable_ecc_new_and_old_pytorch() -> None:
    (new,) = parse_job_text(_read("jade194_ecc_uncorrectable.log"))
    assert (new.kind, new.code, new.payload["error"]) == (
        EventKind.CUDA_ERROR,
        214,
        "uncorrectable_ecc",
    )
    (old,) = parse_job_text(_read("semseg33_old_cuda_runtime_error.log"))
    assert old.code == 214 and old.payload["where"].endswith("THCCachingHostAllocator.cpp:265")


def test_real_cuda_oom_wordings_across_pytorch_versions() -> None:
    lines = _read("torch_oom_old_formats.log").splitlines()
    events = [parse_job_line(line) for line in lines]
    assert all(e is not None and e.kind is EventKind.CUDA_OOM for e in events)
    p = [e.payload for e in events if e is not None]
    assert (p[0]["tried"], p[0]["total"], p[0]["free"]) == ("512.00 MiB", "15.90 GiB", "415.88 MiB")
    assert p[0]["allocated_by_torch"] == "13.13 GiB" and p[0]["reserved_by_torch"] == "14.80 GiB"
    assert p[1]["tried"] == "12.50 MiB" and p[1]["free"] == "9.28 GiB"
    assert p[2]["exception"] == "torch.cuda.OutOfMemoryError" and p[2]["free"] == "11.06 MiB"
    assert p[2]["process_in_use"] == "23.60 GiB" and p[3]["gpu_index"] == 0


def test_real_remote_errors_name_their_cause() -> None:
    (flat,) = parse_job_text(_read("alpaca207_remote_error_one_line.log"))
    assert flat.code == 6 and flat.payload["nccl_version"] == "2.14.3"
    assert flat.payload["last_error"].startswith("NET/IB : Got completion from peer 11.214.147.122")
    dist, remote = parse_job_text(_read("nccl2076_remote_error.log"))
    assert dist.payload["error"] == "remote process exited or there was a network error"
    assert remote.payload["error"] == "ncclRemoteError" and remote.code == 6
    assert remote.payload["last_error"].endswith("Connection reset by peer")


def test_real_socket_and_ib_verbs_warnings() -> None:
    events = parse_job_text(_read("nccl795_socket_remote_peer.log"))
    recv = events[0]
    assert (recv.payload["peer"], recv.payload["socket_error"]) == ("10.200.84.247", "Broken pipe")
    closed = next(e for e in events if e.payload.get("remote"))
    assert closed.payload["peer_port"] == 47861
    ibv = parse_job_text(_read("nccltests185_ibv_unreachable.log"))
    assert ibv[0].payload["socket_error"] == "Network is unreachable"
    assert ibv[0].payload["host"] == "dgxh100-3" and len(ibv) == 4


def test_elided_slurm_host_is_no_node_and_a_real_one_is_kept() -> None:
    events = parse_job_text(_read("slurm_zetta671_time_limit.log"))
    assert [e.node for e in events] == [None, None]  # "ON ..." as posted: the host is elided
    (old,) = parse_job_text(_read("slurm_canu1067_old_cancel.log"))
    assert old.node == "n447"
    assert parse_job_text(_read("slurm_zetta671_time_limit.log"), node="g7")[0].node == "g7"


def test_real_ib_async_events_with_and_without_nccl_prefix() -> None:
    (bare,) = parse_job_text(_read("nccl905_ib_async_port_error.log"))
    assert bare.kind is EventKind.NCCL_ERROR and bare.payload["ib_async_event"] == "port error"
    assert bare.payload["transport"] == "NET/IB" and "host" not in bare.payload
    (gid,) = parse_job_text(_read("vllm5342_ib_async_gid_change.log"))
    assert gid.payload["ib_async_event"] == "GID table change"
    assert (gid.payload["hca"], gid.payload["ib_port"], gid.payload["host"]) == (
        "mlx5_3",
        1,
        "07d92dd514d4",
    )


def test_real_terminal_wrapped_device_assert_is_one_event_per_assert() -> None:
    (ev,) = parse_job_text(_read("genhpf17_device_assert_wrapped.log"))
    assert ev.kind is EventKind.CUDA_ERROR and ev.code == 710 and ev.count == 2
    assert ev.payload["assertion"] == "srcIndex < srcSelectDimSize"
    assert ev.payload["file"].endswith("Indexing.cu") and ev.payload["line"] == 1422
    assert ev.raw is not None and ev.raw.splitlines()[1].strip() == "failed."


def test_wrapped_line_in_a_stream_keeps_the_first_line_offset() -> None:
    parser = JobLogParser(node="n1", job_id="7")
    first, second = _read("genhpf17_device_assert_wrapped.log").splitlines()[:2]
    assert parser.feed(first, ts=1.0, offset=0) == []
    parser.feed(second, ts=1.0, offset=len(first) + 1)
    (ev,) = parser.flush()
    assert ev.payload["offset"] == 0 and ev.job_id == "7"


def test_real_nvidia_smi_lost_handles_are_gpu_lost_with_pci_id() -> None:
    (unknown,) = parse_job_text(_read("returnn1486_nvidia_smi_no_handle.log"))
    assert unknown.kind is EventKind.GPU_LOST and unknown.pci_bus_id == "0000:03:00.0"
    assert unknown.payload["reason"] == "Unknown Error"
    (lost,) = parse_job_text(_read("owod81_nvidia_smi_gpu_is_lost.log"))
    assert lost.pci_bus_id == "0000:02:00.0" and lost.payload["gpu_is_lost"] is True
    assert lost.payload["reason"] == "GPU is lost. Reboot the system to recover this GPU"
    (short,) = parse_job_text(_read("dcgmexporter604_no_handle_short_domain.log"))
    assert short.pci_bus_id == "0000:ba:80.0"


def test_real_reset_required_in_a_session_is_left_to_the_kernel_log() -> None:
    events = parse_job_text(_read("dra982_reset_required_session.log"))
    # The CUDA error is the job's; the NVRM line is the driver's (kmsg reports it once).
    assert [e.kind for e in events] == [EventKind.CUDA_ERROR]


def test_real_kubernetes_memory_evictions_are_host_oom() -> None:
    (ev,) = parse_job_text(_read("k9s174_describe_pod_evicted_memory.log"))
    assert ev.kind is EventKind.HOST_OOM and ev.payload["evicted"] is True
    assert (ev.payload["container"], ev.payload["usage"], ev.payload["request"]) == (
        "proprietary-crawler",
        "9402820Ki",
        "7G",
    )
    events = parse_job_text(_read("kubefate64_events_evicted_memory.log"))
    # The later "[MemoryPressure]" eviction names a node condition, not a resource it ran out of.
    assert [(e.kind, e.payload["container"]) for e in events] == [(EventKind.HOST_OOM, "egg")]


def test_real_nvml_gpu_is_lost_in_a_traceback_and_from_slurmstepd() -> None:
    (py,) = parse_job_text(_read("nvgpu6_nvml_gpu_is_lost.log"))
    assert py.kind is EventKind.GPU_LOST and py.payload["gpu_is_lost"] is True
    (step,) = parse_job_text(_read("plmfit40_slurmstepd_nvml_gpu_lost.log"), job_id="9")
    assert step.kind is EventKind.GPU_LOST and step.payload["stage"] == "slurmstepd"
    assert (step.job_id, step.node) == ("9", None)


def test_nul_terminal_codes_and_control_characters_in_a_users_output_never_reach_the_event() -> (
    None
):
    # A user's job prints what it likes; NUL made PostgreSQL refuse the event (issue #8, 2).
    line = "node7:1:2 [0] NCCL WARN \x00\x1b[31mNET/IB : Got async event : port error\x1b[0m\x07"
    (ev,) = parse_job_text(line + "\n", node="n1", job_id="42", ts=5.0)
    parser = JobLogParser(node="n1", job_id="42")
    fed = parser.feed(line, ts=5.0) + parser.feed("next line", ts=6.0) + parser.flush()
    for event in (ev, *fed):
        text = (event.raw or "") + event.message
        assert not any(ord(c) < 32 and c not in "\t\n\r" for c in text), repr(text)
        assert "NET/IB : Got async event : port error" in (event.raw or "")
        Event.model_validate(event.model_dump())  # within the boundary contract
