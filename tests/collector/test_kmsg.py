"""KmsgSource on a fake /dev/kmsg file of real-format records: dedupe, follow, errors, fallbacks."""

from __future__ import annotations

import errno
import os
import shutil
import threading
from pathlib import Path

import pytest

from collector.base import Observations
from collector.health import SourceHealth
from collector.kmsg import KmsgSource
from collector.slurm.runner import CommandResult, RecordedRunner
from timeline.models import EventKind

FIX = Path(__file__).parent.parent / "fixtures" / "kernel"
BOOT = 1_795_348_860.0


@pytest.fixture
def kmsg(tmp_path: Path) -> Path:
    path = tmp_path / "kmsg"
    shutil.copy(FIX / "kmsg_records.txt", path)
    return path


@pytest.fixture
def boot_id(tmp_path: Path) -> Path:
    path = tmp_path / "boot_id"
    path.write_text("7b3c2e4a-0d7e-4a44-9f3a-3c1f0a2b5d6e\n")
    return path


def _source(kmsg: Path, boot_id: Path, tmp_path: Path, **kw: object) -> KmsgSource:
    args: dict = {
        "node": "gpu-node-07",
        "kmsg_path": str(kmsg),
        "boot_id_path": str(boot_id),
        "state_path": tmp_path / "state" / "kmsg.json",
        "boot_ts": BOOT,
        "clock": lambda: BOOT + 4000.0,
        "health": SourceHealth("kmsg-test"),
    }
    args.update(kw)
    return KmsgSource(**args)


def test_reads_whole_buffer_with_boot_time_stamps_and_sequence_keys(
    kmsg: Path, boot_id: Path, tmp_path: Path
) -> None:
    src = _source(kmsg, boot_id, tmp_path)
    events = src.collect().events
    assert [(e.kind, e.code) for e in events] == [
        (EventKind.XID, 31),
        (EventKind.XID, 43),
        (EventKind.GPU_LOST, None),
    ]
    x31 = events[0]
    assert x31.ts == pytest.approx(BOOT + 24.568904)
    assert x31.dedup_key == "7b3c2e4a-0d7e-4a44-9f3a-3c1f0a2b5d6e:813"
    assert x31.gpu_uuid == "GPU-25179923-e6d8-2c49-9579-04b41661425f"
    assert x31.node == "gpu-node-07" and x31.source == "kmsg"
    lost = events[2]
    assert lost.pci_bus_id == "0000:b3:00.0" and lost.raw is not None
    assert lost.raw.count("\n") == 2  # the \x0a-escaped record, unescaped into its three lines
    assert src.records_read == 6


def test_restart_repeats_nothing_and_reads_only_new_records(
    kmsg: Path, boot_id: Path, tmp_path: Path
) -> None:
    first = _source(kmsg, boot_id, tmp_path)
    assert len(first.collect().events) == 3
    first.close()
    with kmsg.open("a") as f:
        f.write(
            "4,817,1900000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, "
            "GPU has fallen off the bus.\n"
        )
    again = _source(kmsg, boot_id, tmp_path)
    events = again.collect().events
    assert [(e.code, e.payload["seq"]) for e in events] == [(79, 817)]


def test_new_boot_reads_the_buffer_again(kmsg: Path, boot_id: Path, tmp_path: Path) -> None:
    _source(kmsg, boot_id, tmp_path).collect()
    boot_id.write_text("00000000-1111-2222-3333-444444444444\n")
    events = _source(kmsg, boot_id, tmp_path).collect().events
    assert len(events) == 3 and events[0].dedup_key is not None
    assert events[0].dedup_key.startswith("00000000-1111")


def test_follow_picks_up_appended_records(kmsg: Path, boot_id: Path, tmp_path: Path) -> None:
    src = _source(kmsg, boot_id, tmp_path)
    src.collect()
    assert src.collect().events == []
    with kmsg.open("a") as f:
        f.write("4,900,2000000000,-;NVRM: Xid (PCI:0000:00:06): 13, pid=5, name=py, Graphics SM\n")
    (ev,) = src.collect().events
    assert ev.code == 13 and ev.gpu_uuid == "GPU-25179923-e6d8-2c49-9579-04b41661425f"


def test_flood_first_goes_out_at_once_and_repeats_follow_as_one_counted_event(
    kmsg: Path, boot_id: Path, tmp_path: Path
) -> None:
    now = [BOOT + 2000.0]
    src = _source(kmsg, boot_id, tmp_path, clock=lambda: now[0], flood_window_s=10.0)
    src.collect()
    line = "4,{seq},1999000000,-;NVRM: Xid (PCI:0000:00:06): 13, pid=5, name=py, Graphics Exception"
    with kmsg.open("a") as f:
        f.writelines(line.format(seq=1000 + i) + "\n" for i in range(2000))
    (first,) = src.collect().events  # the alert is not late: the first line goes out now
    assert first.count == 1 and first.dedup_key is not None and first.dedup_key.endswith(":1000")
    state = (tmp_path / "state" / "kmsg.json").read_text()
    assert '"seq": 999' in state  # the checkpoint stops before the flood still being counted
    now[0] = BOOT + 2020.0
    (repeats,) = src.collect().events
    assert repeats.count == 1999 and repeats.payload["repeat"] is True
    assert repeats.dedup_key is not None and repeats.dedup_key.endswith(":1000:repeats")
    assert repeats.code == 13 and repeats.gpu_uuid == first.gpu_uuid


def test_permission_denied_is_counted_and_falls_back_to_the_journal(
    kmsg: Path, boot_id: Path, tmp_path: Path
) -> None:
    def denied(path: str, flags: int) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    journal = (FIX / "journalctl_short_iso.txt").read_text()
    runner = RecordedRunner(replies={"journalctl -k": journal})
    health = SourceHealth("kmsg-eacces")
    now = [BOOT + 4000.0]
    src = _source(
        kmsg,
        boot_id,
        tmp_path,
        opener=denied,
        journal_runner=runner,
        health=health,
        clock=lambda: now[0],
    )
    events = src.collect().events
    assert health.errors["kmsg_permission_denied"] == 1 and src.mode == "journal"
    assert [e.pci_bus_id for e in events] == ["0000:dc:00.0", "0000:ed:00.0"]
    assert all(e.node == "gpu-node-07" and e.dedup_key for e in events)
    assert "-b" in runner.calls[0]
    runner.replies["journalctl -k"] = "-- No entries --\n"
    assert src.collect().events == [] and len(runner.calls) == 1  # not every poll: every 5 s
    now[0] += 5.0
    assert src.collect().events == []
    assert any(a.startswith("--after-cursor=s=7c4c5c1a") for a in runner.calls[1])


def test_journal_failure_is_counted_not_raised(kmsg: Path, boot_id: Path, tmp_path: Path) -> None:
    runner = RecordedRunner(
        replies={"journalctl": CommandResult(("journalctl",), None, "", "", True, "timeout")}
    )
    health = SourceHealth("kmsg-journal-timeout")
    src = _source(tmp_path / "absent", boot_id, tmp_path, journal_runner=runner, health=health)
    assert src.collect().events == []
    assert health.errors["kmsg_not_found"] == 1 and health.errors["journalctl_timeout"] == 1


def test_file_fallback_follows_kern_log(boot_id: Path, tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    shutil.copy(FIX / "popos3363_aer_journal.txt", log)
    src = _source(tmp_path / "absent", boot_id, tmp_path, fallback_file=str(log))
    events = src.collect().events
    assert events and all(e.kind is EventKind.PCIE_AER for e in events)
    assert src.mode == "file"
    with log.open("a") as f:
        f.write((FIX / "ogkm1150_xid45_journal.txt").read_text().splitlines()[0] + "\n")
    (ev,) = src.collect().events
    assert ev.code == 45 and ev.dedup_key is not None and ev.dedup_key.startswith("line:")


def test_epipe_overrun_is_counted_and_reading_goes_on(
    kmsg: Path, boot_id: Path, tmp_path: Path
) -> None:
    calls = iter([True])

    def read(fd: int, n: int) -> bytes:
        # The first read finds the ring buffer overwritten, as the kernel reports it (EPIPE).
        if next(calls, False):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        return os.read(fd, n)

    health = SourceHealth("kmsg-epipe")
    src = _source(kmsg, boot_id, tmp_path, reader=read, health=health)
    assert len(src.collect().events) == 3
    assert src.overruns == 1 and health.errors["kmsg_overrun"] == 1


def test_garbage_records_are_counted_and_the_rest_kept(
    kmsg: Path, boot_id: Path, tmp_path: Path
) -> None:
    with kmsg.open("a") as f:
        f.write("this is not a kmsg record\n\x00\x01garbage;;\n")
        f.write("4,950,2100000000,-;NVRM: Xid (PCI:0000:00:06): 48, pid=1, name=x, DBE\n")
    health = SourceHealth("kmsg-garbage")
    events = _source(kmsg, boot_id, tmp_path, health=health).collect().events
    assert [e.code for e in events][-1] == 48
    assert health.parse_failures["kmsg_record"] == 2


def test_gpu_map_from_nvml_names_uuid_and_index(kmsg: Path, boot_id: Path, tmp_path: Path) -> None:
    gmap = {"0000:b3:00.0": ("GPU-b3", 5)}
    events = _source(kmsg, boot_id, tmp_path, gpu_map=lambda: gmap).collect().events
    lost = next(e for e in events if e.kind is EventKind.GPU_LOST)
    assert lost.gpu_uuid == "GPU-b3" and lost.payload["gpu_index"] == 5


def test_run_streams_until_stopped_and_flushes_what_it_held(
    kmsg: Path, boot_id: Path, tmp_path: Path
) -> None:
    src = _source(kmsg, boot_id, tmp_path, clock=lambda: BOOT, poll_s=0.01)
    got: list[Observations] = []
    stop = threading.Event()

    def emit(obs: Observations) -> None:
        got.append(obs)
        stop.set()

    t = threading.Thread(target=src.run, args=(emit, stop))
    t.start()
    t.join(timeout=10)
    assert not t.is_alive()
    codes = [e.code for obs in got for e in obs.events]
    assert 31 in codes and 43 in codes


@pytest.mark.integration
def test_real_dev_kmsg_reads_and_a_restart_repeats_nothing(tmp_path: Path) -> None:
    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("/dev/kmsg is not readable here")
    state = tmp_path / "kmsg.json"
    health = SourceHealth("kmsg-real")
    first = KmsgSource(node="here", state_path=state, health=health)
    first.collect()
    first.close()
    assert first.mode == "kmsg" and first.records_read > 0
    assert health.total_errors() == 0 and health.total_parse_failures() == 0
    again = KmsgSource(node="here", state_path=state, health=health)
    again.collect()
    again.close()
    assert again.records_read < first.records_read  # only records logged in between, if any


def test_unreadable_boot_id_still_tells_boots_apart(kmsg: Path, tmp_path: Path) -> None:
    health = SourceHealth("kmsg-noboot")
    src = _source(kmsg, tmp_path / "absent-boot-id", tmp_path, health=health)
    (ev, *_) = src.collect().events
    assert health.errors["boot_id_unreadable"] == 1
    assert ev.dedup_key == f"boot-{round(BOOT / 60)}:813"
    later_boot = _source(kmsg, tmp_path / "absent-boot-id", tmp_path, boot_ts=BOOT + 3600)
    assert len(later_boot.collect().events) == 3  # a new boot: its records are new
