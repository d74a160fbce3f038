"""NVML source over the recorded-H100 fake: cadence, NotSupported memo, lost GPUs, events, MIG."""

from __future__ import annotations

import threading
from pathlib import Path

import pynvml
import pytest

from collector.base import Observations
from collector.fakenvml import FakeNvml
from collector.nvml import NvmlSource
from collector.nvml_events import NvmlEventSource
from collector.procs import ProcessJobMapper
from timeline.models import EventKind, Scheduler, Severity


def _source(fake: FakeNvml, **kw: object) -> NvmlSource:
    return NvmlSource(fake, node="gpu-node-1", clock=lambda: 1000.0, **kw)  # type: ignore[arg-type]


def test_first_collect_reports_identity_and_hot_fields_of_every_gpu() -> None:
    fake = FakeNvml(gpus=2)
    obs = _source(fake).collect()
    assert [g.uuid for g in obs.gpus] == [fake.gpu(0).uuid, fake.gpu(1).uuid]
    g0 = obs.gpus[0]
    assert g0.pci_bus_id == "0000:00:06.0" and g0.name == "NVIDIA H100 80GB HBM3"
    assert g0.serial == "1752724020927" and g0.mig_mode is False
    assert g0.memory_total_mb == 81559.0  # nvidia-smi -q: FB Memory Usage Total 81559 MiB
    s = obs.samples[0]
    for name in ("util_gpu", "util_mem", "mem_used_mb", "power_w", "temp_gpu", "temp_mem"):
        assert getattr(s, name) is not None, name
    assert s.sm_clock_mhz is not None and s.clock_event_reasons is not None
    assert s.temp_mem == 39.0  # NVML_FI_DEV_MEMORY_TEMP as recorded


def test_slow_fields_are_read_every_n_intervals_only() -> None:
    fake = FakeNvml(gpus=1)
    src = _source(fake, slow_every=3)
    energy = [src.collect().samples[0].energy_mj for _ in range(7)]
    assert [e is not None for e in energy] == [True, False, False, True, False, False, True]
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 3
    assert fake.calls["nvmlDeviceGetUtilizationRates"] == 7


def test_slow_sample_carries_ecc_remap_and_pcie_as_recorded() -> None:
    s = _source(FakeNvml()).collect().samples[0]
    assert (s.ecc_sbe_volatile, s.ecc_dbe_volatile, s.ecc_dbe_aggregate) == (0, 0, 0)
    assert (s.remapped_correctable, s.remap_pending, s.remap_failure) == (0, False, False)
    assert s.pcie_replay == 0
    assert s.retired_pages_sbe is None and s.nvlink_crc_errors is None  # NotSupported on H100


def test_not_supported_getters_are_called_once_then_remembered() -> None:
    fake = FakeNvml(gpus=2)
    fake.set_not_supported("nvmlDeviceGetPowerUsage", index=1)
    src = _source(fake, slow_every=1)
    for _ in range(5):
        obs = src.collect()
    assert obs.samples[0].power_w is not None and obs.samples[1].power_w is None
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 5 + 1  # GPU 0 every time, GPU 1 once
    assert fake.calls["nvmlDeviceGetRetiredPages"] == 2 * 2  # two causes x two GPUs, once
    assert src.health.total_errors() == 0  # NotSupported is not an error


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN])
def test_a_lost_gpu_gives_one_gpu_lost_event_and_the_others_keep_reporting(code: int) -> None:
    fake = FakeNvml(gpus=2)
    src = _source(fake)
    src.collect()
    fake.lose_gpu(1, code)
    rounds = [src.collect() for _ in range(4)]
    lost = [e for r in rounds for e in r.events if e.kind == EventKind.GPU_LOST]
    assert len(lost) == 1
    assert lost[0].gpu_uuid == fake.gpu(1).uuid and lost[0].severity == Severity.CRITICAL
    assert lost[0].pci_bus_id == "0000:00:07.0"
    assert all([s.gpu_uuid for s in r.samples] == [fake.gpu(0).uuid] for r in rounds)
    fake.recover_gpu(1)
    assert len(src.collect().samples) == 2


def test_ecc_and_row_remap_counters_that_move_become_events() -> None:
    fake = FakeNvml()
    src = _source(fake, slow_every=1)
    assert src.collect().events == []
    nv = pynvml
    fake.set_ecc(0, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC, 2)
    fake.set_remapped_rows(0, (0, 1, 1, 0))
    events = {e.kind: e for e in src.collect().events}
    assert events[EventKind.ECC].payload["moved"] == {"ecc_dbe_volatile": [0, 2]}
    assert events[EventKind.ROW_REMAP].payload["moved"] == {
        "remapped_uncorrectable": [0, 1],
        "remap_pending": [False, True],
    }
    assert src.collect().events == []  # no movement, no event


def test_mig_mode_is_reported_and_mig_devices_do_not_crash_it(tmp_path: Path) -> None:
    fake = FakeNvml(gpus=2)
    src = _source(fake, slow_every=1, proc_mapper=ProcessJobMapper(tmp_path))
    src.collect()
    fake.enable_mig(0, instances=3)
    obs = src.collect()
    assert [g.mig_mode for g in obs.gpus] == [True]
    assert len(src.gpus[0].mig_handles) == 3
    assert obs.samples[0].util_gpu is None  # utilization is NotSupported in MIG mode
    assert obs.samples[0].power_w is not None and len(obs.samples) == 2
    assert src.health.total_errors() == 0


def test_processes_map_to_jobs_as_allocations_that_open_and_close(tmp_path: Path) -> None:
    pid_dir = tmp_path / "4242"
    pid_dir.mkdir()
    (pid_dir / "environ").write_bytes(b"HOME=/home/ana\0SLURM_JOB_ID=81234\0SLURM_PROCID=0\0")
    (pid_dir / "cgroup").write_text(
        "0::/system.slice/slurmstepd.scope/job_81234/step_0/user/task_0\n"
    )
    clock = iter([10.0, 20.0, 30.0])
    fake = FakeNvml(gpus=2)
    src = NvmlSource(
        fake, node="n1", clock=lambda: next(clock), proc_mapper=ProcessJobMapper(tmp_path)
    )
    fake.set_processes(1, [(4242, 618 * 1024 * 1024)])
    (opened,) = src.collect().allocations
    assert (opened.scheduler, opened.job_id, opened.gpu_index) == (Scheduler.SLURM, "81234", 1)
    assert opened.gpu_uuid == fake.gpu(1).uuid and opened.start_ts == 10.0 and opened.end_ts is None
    assert src.collect().allocations == []  # still held: nothing new to say
    fake.set_processes(1, [])
    (closed,) = src.collect().allocations
    assert (closed.start_ts, closed.end_ts) == (10.0, 30.0)


def test_driver_missing_is_counted_not_raised() -> None:
    class NoDriver(FakeNvml):
        def nvmlInit(self) -> None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    src = _source(NoDriver())
    assert src.collect().is_empty()
    assert src.health.errors["nvmlInit"] == 1


def _run_events(fake: FakeNvml) -> tuple[NvmlEventSource, list[Observations], threading.Event]:
    src = NvmlEventSource(fake, node="gpu-node-1", wait_ms=20, clock=lambda: 5.0)
    got: list[Observations] = []
    stop = threading.Event()
    threading.Thread(target=src.run, args=(got.append, stop), daemon=True).start()
    assert src.ready.wait(5)
    return src, got, stop


def _wait_for(cond: object, stop: threading.Event) -> None:
    for _ in range(500):
        if cond():  # type: ignore[operator]
            return
        stop.wait(0.01)


def test_event_thread_delivers_the_real_xid_31_payload_at_once() -> None:
    fake = FakeNvml(gpus=2)
    src, got, stop = _run_events(fake)
    assert src.registered[fake.gpu(0).uuid] & pynvml.nvmlEventTypeXidCriticalError
    assert fake.queue_recorded_xids(0) == [31, 43]
    _wait_for(lambda: len(got) == 2, stop)
    stop.set()
    xid31 = got[0].events[0]
    assert (xid31.kind, xid31.code, xid31.source) == (EventKind.XID, 31, "nvml")
    assert xid31.gpu_uuid == fake.gpu(0).uuid and xid31.pci_bus_id == "0000:00:06.0"
    assert xid31.payload == {
        "event_type": 8,
        "event_data": 31,
        "gpu_instance_id": None,
        "compute_instance_id": None,
    }
    assert got[1].events[0].code == 43


def test_event_thread_reports_ecc_events_and_stops_cleanly() -> None:
    fake = FakeNvml()
    _src, got, stop = _run_events(fake)
    fake.queue_event(0, pynvml.nvmlEventTypeDoubleBitEccError, 0)
    _wait_for(lambda: got, stop)
    stop.set()
    _wait_for(lambda: fake.initialized == 0, threading.Event())
    event = got[0].events[0]
    assert event.kind == EventKind.ECC and event.payload["ecc"] == "dbe"
    assert fake.initialized == 0  # nvmlShutdown balanced the nvmlInit


def test_gpu_map_gives_the_kernel_log_source_uuid_and_index_by_pci_id() -> None:
    fake = FakeNvml(gpus=2)
    src = _source(fake)
    src.collect()
    assert src.gpu_map() == {
        "0000:00:06.0": (fake.gpu(0).uuid, 0),
        "0000:00:07.0": (fake.gpu(1).uuid, 1),
    }


def test_a_getter_that_fails_is_counted_each_time_and_the_rest_of_the_sample_kept() -> None:
    class NoPermission(FakeNvml):
        def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)

    src = _source(NoPermission())
    samples = [src.collect().samples[0] for _ in range(3)]
    assert all(s.power_w is None and s.util_gpu is not None for s in samples)
    assert src.health.errors["nvmlDeviceGetPowerUsage"] == 3  # not memoized: may come back
    assert not any(key[1] == "nvmlDeviceGetPowerUsage" for key in src.unsupported)
