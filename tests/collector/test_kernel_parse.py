"""Kernel log parsing on real recorded lines: Xid, SXid, GPU lost, GSP/RmInitAdapter, AER, OOM."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.parse.kernel import KernelLogParser, parse_kernel_line, parse_kernel_text
from timeline.models import Event, EventKind, Severity

FIX = Path(__file__).parent.parent / "fixtures" / "kernel"


def _read(name: str) -> str:
    return (FIX / name).read_text()


def test_real_h100_xid31_and_xid43_parse_with_pci_pid_name_channel_and_uuid() -> None:
    events = parse_kernel_text(_read("h100_xid31_xid43.dmesg"), node="h100-1", boot_ts=1_000.0)
    assert [(e.kind, e.code) for e in events] == [(EventKind.XID, 31), (EventKind.XID, 43)]
    x31 = events[0]
    assert x31.pci_bus_id == "0000:00:06.0"
    assert x31.payload["pci_raw"] == "0000:00:06"
    assert x31.payload["pid"] == 404
    assert x31.payload["process_name"] == "python3"
    assert x31.payload["channel"] == "0x0000000a"
    assert x31.payload["text"].startswith("MMU Fault: ENGINE GRAPHICS GPC1")
    assert x31.ts == pytest.approx(1_000.0 + 24.568904)
    # The driver printed the GPU's UUID for that PCI id just before: the event carries it.
    assert x31.gpu_uuid == "GPU-25179923-e6d8-2c49-9579-04b41661425f"
    assert x31.payload["gpu_serial"] == "1652624035030"
    assert x31.raw is not None and x31.raw.startswith("[   24.568904] NVRM: Xid")
    assert events[1].payload["pid"] == 427 and events[1].node == "h100-1"


def test_kmsg_record_gives_sequence_level_and_uptime() -> None:
    line = (
        "4,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
        "GPU has fallen off the bus."
    )
    ev = parse_kernel_line(line, boot_ts=1_700_000_000.0)
    assert ev is not None
    assert (ev.kind, ev.code, ev.pci_bus_id) == (EventKind.XID, 79, "0000:3b:00.0")
    assert ev.payload["seq"] == 1234 and ev.payload["syslog_level"] == 4
    assert ev.ts == pytest.approx(1_700_000_005.678901)
    assert ev.payload["text"] == "GPU has fallen off the bus."


def test_journal_line_names_its_host_and_time() -> None:
    line = (
        "Feb 14 05:03:41 gpu-1 kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, "
        "name=python3, Ch 00000001 caused by previous Xid 149"
    )
    ev = parse_kernel_line(line, year=2026)
    assert ev is not None and ev.node == "gpu-1"
    assert ev.ts == pytest.approx(1771045421.0)  # 2026-02-14T05:03:41Z
    assert ev.payload["channel"] == "0x00000001" and ev.payload["caused_by_xid"] == 149


def test_short_iso_journal_line() -> None:
    line = (
        "2026-11-22T12:00:01+0000 node7 kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, "
        "An uncorrectable double bit error"
    )
    ev = parse_kernel_line(line)
    assert ev is not None and ev.node == "node7" and ev.code == 48
    assert ev.ts == pytest.approx(1795348801.0)


def test_real_multiline_fallen_off_bus_without_xid_is_one_gpu_lost_event() -> None:
    events = parse_kernel_text(_read("nvsentinel155_fallen_off_bus_no_xid.dmesg"))
    assert len(events) == 1
    ev = events[0]
    assert ev.kind is EventKind.GPU_LOST and ev.pci_bus_id == "0000:b3:00.0"
    assert ev.payload["pci_device_id"] == "10de:26b5"
    assert ev.raw is not None and ev.raw.count("\n") == 2  # all three lines kept as evidence


def test_real_rm_init_adapter_failures_are_gsp_events() -> None:
    events = parse_kernel_text(_read("cmpunlocker4_rminitadapter.dmesg"))
    kinds = {e.kind for e in events}
    assert kinds == {EventKind.GSP}
    first = events[0]
    assert first.pci_bus_id == "0000:01:00.0" and first.payload["status"] == "0x22:0x56:894"
    # The same line printed twice (two tries) collapses into one event with a count.
    assert sum(e.count for e in events) == 4 and len(events) == 2


def test_real_nvlink_xids_keep_their_text() -> None:
    events = parse_kernel_text(_read("gpud_kmsg_nvlink_xids.txt"))
    assert [e.code for e in events] == [144, 149, 145, 94]
    assert events[2].pci_bus_id == "0018:01:00.0"
    assert "RLW_RXPIPE Nonfatal" in events[2].payload["text"]


def test_real_xid45_lines_each_name_their_gpu() -> None:
    events = parse_kernel_text(_read("ogkm1150_xid45_journal.txt"))
    assert {e.pci_bus_id for e in events} == {
        "0000:dc:00.0",
        "0000:ed:00.0",
        "0000:ba:00.0",
        "0000:97:00.0",
    }
    assert all(e.code == 45 for e in events)


def test_real_sxid_data_line_from_dmesg_iso() -> None:
    (ev,) = parse_kernel_text(_read("gpud_dmesg_sxid_iso.txt"))
    assert ev.kind is EventKind.SXID and ev.code == 12028
    assert ev.pci_bus_id == "0000:84:00.0" and ev.payload["switch"] == "nvidia-nvswitch1"
    assert ev.payload["syslog_level"] == 3


def test_flood_of_identical_xid_lines_is_one_event_with_count() -> None:
    lines = [
        f"[ {100 + i * 0.001:.6f}] NVRM: Xid (PCI:0000:3b:00): 13, pid=9, name=py, Graphics Exc"
        for i in range(5000)
    ]
    events = parse_kernel_text("\n".join(lines))
    assert len(events) == 1 and events[0].count == 5000
    assert events[0].payload["last_ts"] == pytest.approx(100 + 4999 * 0.001)


def test_flood_memory_is_bounded_by_max_keys() -> None:
    parser = KernelLogParser(max_flood_keys=8)
    out = []
    for i in range(100):
        out += parser.feed(f"[ 1.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=py, text {i}")
    assert len(out) == 92  # everything past the 8 held was released early, nothing lost
    assert len(out + parser.flush()) == 100


def test_lines_that_matter_to_no_one_give_none() -> None:
    assert parse_kernel_line("[    0.000000] Linux version 6.1.0-18-amd64") is None
    assert parse_kernel_line("") is None
    assert parse_kernel_line("garbage \x00\xff ;;;") is None


def test_gpu_map_from_nvml_fills_uuid_and_index() -> None:
    parser = KernelLogParser(gpu_map={"0000:3b:00.0": ("GPU-abc", 2)})
    out = parser.feed(
        "[ 5.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus."
    )
    out += parser.flush()
    assert out[0].gpu_uuid == "GPU-abc" and out[0].payload["gpu_index"] == 2


def test_sxid_fatal_severity_as_stated() -> None:
    ev = parse_kernel_line(
        "nvidia-nvswitch0: SXid (PCI:0000:87:00.0): 20034, Fatal, Link 22 LTSSM Fault Up"
    )
    assert ev is not None and ev.severity is Severity.CRITICAL
    assert ev.payload["fatal"] is True and ev.payload["link"] == 22


def test_real_aer_fatal_groups_detail_lines_then_xid79_names_the_gpu() -> None:
    events = parse_kernel_text(_read("gpuburn1_aer_fatal_then_xid79.dmesg"))
    assert [e.kind for e in events] == [EventKind.PCIE_AER, EventKind.PCIE_AER, EventKind.XID]
    corrected, fatal, xid = events
    assert corrected.severity is Severity.WARNING and fatal.severity is Severity.CRITICAL
    assert fatal.pci_bus_id == "0000:00:02.0" and fatal.payload["requester_id"] == "0010"
    assert any("Surprise Down Error" in d for d in fatal.payload["details"])
    assert fatal.raw is not None and fatal.raw.count("\n") == 3  # head + 3 detail lines
    assert xid.code == 79 and xid.gpu_uuid == "GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df"


def test_real_aer_source_device_and_nonfatal_severity() -> None:
    events = parse_kernel_text(_read("ms02_aer_nonfatal_journal.txt"), year=2025)
    nonfatal = next(e for e in events if "Non-Fatal" in e.message)
    assert nonfatal.severity is Severity.ERROR and nonfatal.node == "pve"
    assert nonfatal.payload["source"] == "0000:80:1b.4"
    assert any(d.startswith("TLP Header") for d in nonfatal.payload["details"])
    recover = next(e for e in events if "can't recover" in e.message)
    assert recover.pci_bus_id == "0000:97:00.0" and recover.severity is Severity.ERROR


def test_real_dmesg_relative_stamps_and_caller_ids_do_not_break_parsing() -> None:
    rel = parse_kernel_text(_read("returnn1500_aer_dmesg_H.dmesg"))
    nvidia = next(e for e in rel if e.pci_bus_id == "0000:03:00.0")
    assert nvidia.count == 2 and "uptime_s" not in nvidia.payload
    caller = parse_kernel_text(_read("qclinux1118_aer_caller_id.dmesg"))
    head = next(e for e in caller if "received" in e.message)
    assert head.payload["uptime_s"] == pytest.approx(36.772366)


def test_real_k8s_memcg_oom_episode_is_one_event_with_pod_uid_and_victim() -> None:
    (ev,) = parse_kernel_text(_read("harvester_memcg_oom_dmesg_T.dmesg"))
    assert ev.kind is EventKind.HOST_OOM
    assert ev.payload["stages"] == ["invoked", "oom_kill", "killed", "reaped"]
    assert ev.payload["task"] == "qemu-system-x86" and ev.payload["pid"] == 70870
    assert ev.payload["invoked_by"] == "CPU 11/KVM"
    assert ev.payload["pod_uid"] == "ef91e487-dec5-4613-800b-eb23e1a1617d"
    assert ev.payload["anon_rss_kb"] == 66852088
    assert ev.message.startswith("Memory cgroup out of memory: Killed process 70870")
    assert ev.ts == pytest.approx(1715266358.0)  # dmesg -T stamp, read as UTC


def test_real_oom_in_localized_dmesg_still_parses() -> None:
    (ev,) = parse_kernel_text(_read("zh_blog_k8s_oom_dmesg_T_locale.dmesg"))
    assert ev.payload["pod_uid"] == "28fcb1a0-a45c-44e7-b9bf-e3b9360bedba"
    assert ev.payload["task"] == "java" and ev.payload["uid"] == 10000


def test_slurm_cgroup_path_in_oom_kill_line_gives_the_job_id() -> None:
    # Line shape from the kernel's mm/oom_kill.c format; the cgroup path is Slurm's
    # cgroup/v1 layout (slurm/uid_<uid>/job_<id>/step_<step>).
    line = (
        "[ 812.1] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,"
        "oom_memcg=/slurm/uid_1000/job_4242,task_memcg=/slurm/uid_1000/job_4242/step_0/task_0,"
        "task=python,pid=3131,uid=1000"
    )
    ev = parse_kernel_line(line, node="gpu-3")
    assert ev is not None and ev.kind is EventKind.HOST_OOM
    assert ev.job_id == "4242" and ev.payload["pid"] == 3131


def test_kern_log_with_inner_uptime_stamp() -> None:
    (ev,) = parse_kernel_text(_read("francesbagual_oom_kern_log.txt"), year=2016)
    assert ev.node == "dev-VirtualBox" and ev.payload["uptime_s"] == pytest.approx(4563.079551)
    assert ev.payload["invoked_by"] == "memory-hog-2048"


def test_real_gsp_rpc_timeout_xid119_lines() -> None:
    events = parse_kernel_text(_read("nvsentinel_xid_lines.journal"))
    x119 = [e for e in events if e.code == 119]
    assert {e.pci_bus_id for e in x119} == {"0002:00:00.0", "0001:00:00.0"}
    first = next(e for e in x119 if e.pci_bus_id == "0002:00:00.0")
    assert first.payload["process_name"] == "nvc:[driver]" and first.payload["pid"] == 1582259
    assert first.payload["text"].startswith("Timeout after 6s of waiting for RPC response")
    assert {e.code for e in events} == {119, 79, 94, 13, 120, 48}


def test_real_process_name_with_a_space_and_gsp_exception() -> None:
    events = parse_kernel_text(_read("dgx_spark_xid119_120.txt"))
    assert [e.code for e in events] == [119, 120]
    assert events[0].payload["process_name"] == "KMS thread"
    assert events[1].payload["text"] == "GSP task exception: load access fault"


def test_real_talos_dmesg_prefix_gives_host_and_time() -> None:
    ev = parse_kernel_line(
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.291660856Z]: NVRM: Xid "
        "(PCI:0000:01:00): 119, pid=1, name=x, Timeout after 6s of waiting for RPC response "
        "from GPU0 GSP!"
    )
    assert ev is not None and ev.node == "192.168.11.119" and ev.payload["syslog_level"] == 4
    assert ev.ts == pytest.approx(1776893271.291660)
    assert parse_kernel_text(_read("talos_gsp_trace.txt")) == []  # trace dump lines: nothing


def test_real_nvlink_post_rx_failure_is_an_nvlink_event() -> None:
    (ev,) = parse_kernel_text(_read("gpud1271_nvlink_postrx.journal"), year=2026)
    assert ev.kind is EventKind.NVLINK and ev.node == "pool0-0082"


def test_real_gsp_timeout_banner_is_a_gsp_event_beside_its_xid119() -> None:
    events = parse_kernel_text(_read("archwiki_gsp_timeout.txt"))
    assert [(e.kind, e.code) for e in events] == [(EventKind.GSP, None), (EventKind.XID, 119)]
    assert "sequence 1321" in events[1].payload["text"]


def test_flood_counting_resumes_correctly_around_a_multiline_group() -> None:
    xid = "[ {t}] NVRM: Xid (PCI:0000:3b:00): 13, pid=9, name=py, Graphics Exception"
    aer = [
        "[ 2.5] pcieport 0000:00:01.0: AER: Corrected error received: 0000:3b:00.0",
        "[ 2.5] nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
        "(Receiver ID)",
    ]
    lines = [xid.format(t=1.0 + i / 100) for i in range(50)] + aer
    lines += [xid.format(t=3.0 + i / 100) for i in range(50)]
    events = parse_kernel_text("\n".join(lines))
    xids = [e for e in events if e.kind is EventKind.XID]
    assert sum(e.count for e in xids) == 100 and len(xids) == 1
    (group,) = [e for e in events if e.kind is EventKind.PCIE_AER]
    assert group.pci_bus_id == "0000:3b:00.0" and len(group.payload["details"]) == 1


def test_real_xid79_unknown_pid_gpu_lost_and_fatal_sxids_with_their_data() -> None:
    events = parse_kernel_text(_read("sxid_kb_xid79_sxid20034.dmesg"))
    xid = next(e for e in events if e.kind is EventKind.XID)
    assert xid.code == 79 and xid.payload["pid"] is None and xid.payload["process_name"] is None
    assert xid.gpu_uuid == "GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b"
    lost = next(e for e in events if e.kind is EventKind.GPU_LOST)
    assert lost.pci_bus_id == "0000:91:00.0" and lost.gpu_uuid == xid.gpu_uuid
    fatal = [e for e in events if e.kind is EventKind.SXID and e.payload.get("fatal")]
    assert {(e.payload["switch"], e.payload["link"]) for e in fatal} == {
        ("nvidia-nvswitch1", 48),
        ("nvidia-nvswitch0", 63),
        ("nvidia-nvswitch2", 37),
        ("nvidia-nvswitch0", 62),
    }
    assert all(e.severity is Severity.CRITICAL and e.code == 20034 for e in fatal)
    link63 = next(e for e in fatal if e.payload["link"] == 63)
    assert link63.payload["details"][0].startswith("Data {0x10000000")


def test_real_nonfatal_sxid_groups_severity_and_data_lines() -> None:
    (ev,) = parse_kernel_text(_read("sxid22013_nonfatal.dmesg"))
    assert ev.kind is EventKind.SXID and ev.severity is Severity.WARNING
    assert ev.payload["link"] == 60 and len(ev.payload["details"]) == 2
    assert ev.raw is not None and ev.raw.count("\n") == 2


def test_journal_short_monotonic_and_short_precise_forms() -> None:
    msg = "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, An uncorrectable double bit error"
    mono = parse_kernel_line(f"[ 1234.567890] gpu-2 kernel: {msg}", boot_ts=1000.0)
    assert mono is not None and mono.node == "gpu-2" and mono.ts == pytest.approx(2234.56789)
    precise = parse_kernel_line(f"Nov 22 12:00:00.123456 gpu-3 kernel: {msg}", year=2026)
    assert precise is not None and precise.node == "gpu-3" and precise.code == 48


def test_real_old_kernel_oom_wording() -> None:
    (ev,) = parse_kernel_text(_read("beowulf_old_oom_kill.txt"), year=2014)
    assert ev.kind is EventKind.HOST_OOM and ev.node == "cluster1"
    assert (ev.payload["pid"], ev.payload["task"]) == (7963, "sge_qmaster")


def test_an_xid_right_after_an_unfinished_gpu_header_is_not_swallowed() -> None:
    text = (
        "[ 5.000000] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5)\n"
        "[ 5.000000] NVRM: Xid (PCI:0000:b3:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
    )
    (ev,) = parse_kernel_text(text)
    assert ev.kind is EventKind.XID and ev.code == 79


def test_real_reset_required_assert_is_gpu_lost_needing_reset() -> None:
    (ev,) = parse_kernel_text(_read("dra982_reset_required.dmesg"), node="g1", boot_ts=1_000.0)
    assert ev.kind is EventKind.GPU_LOST and ev.payload["reset_required"] is True
    assert ev.severity is Severity.CRITICAL and ev.node == "g1"
    assert ev.ts == 1_000.0 + 373871.354096


def test_nul_and_control_characters_in_a_kernel_line_never_reach_the_event() -> None:
    line = (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=py\x00th\x1bon, GPU has fallen off the bus."
    )
    ev = parse_kernel_line(line, ts=1_700_000_000.0)
    parser = KernelLogParser(node="n1")
    fed = parser.feed(line, ts=1_700_000_000.0) + parser.flush()
    for event in (ev, *fed):
        assert event is not None and event.code == 79
        text = (event.raw or "") + event.message + str(event.payload)
        assert "\x00" not in text and "\x1b" not in text, repr(text)
        Event.model_validate(event.model_dump())  # within the boundary contract


def test_oom_episodes_of_different_syslog_hosts_stay_apart_when_interleaved() -> None:
    # Line shapes from mm/oom_kill.c (dump_header / __oom_kill_process) behind rsyslog's
    # "Mon DD HH:MM:SS host kernel:" prefix; a central syslog interleaves two hosts' episodes.
    invoked = (
        "kernel: python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, "
        "oom_score_adj=0"
    )
    killed = (
        "kernel: Out of memory: Killed process {pid} (python) total-vm:1000kB, anon-rss:500kB, "
        "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:40kB oom_score_adj:0"
    )
    text = (
        f"Mar  1 10:00:01 gpu-a {invoked}\n"
        f"Mar  1 10:00:01 gpu-b {invoked}\n"
        f"Mar  1 10:00:02 gpu-a {killed.format(pid=111)}\n"
        f"Mar  1 10:00:02 gpu-b {killed.format(pid=222)}\n"
    )
    events = parse_kernel_text(text, year=2026)
    assert [(e.node, e.payload["pid"], e.payload["stages"]) for e in events] == [
        ("gpu-a", 111, ["invoked", "killed"]),
        ("gpu-b", 222, ["invoked", "killed"]),
    ]
    for ev in events:  # each episode quotes only its own host's lines
        assert all(f" {ev.node} kernel:" in line for line in (ev.raw or "").splitlines())
