"""DcgmSource on real published dcgm-exporter output, served over httpx's MockTransport."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from collector.dcgm import DcgmSource
from collector.health import SourceHealth
from collector.parse.dcgm import parse_dcgm_text
from timeline.models import EventKind, Scheduler, Severity

FIX = Path(__file__).parent.parent / "fixtures" / "dcgm"
LKE = (FIX / "lke_rtx4000ada_pod_labels.prom").read_text()
UUID = "GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c"


class Exporter:
    """Serves scrapes in turn, as a dcgm-exporter on :9400 would; or fails as told."""

    def __init__(self, *bodies: str, status: int = 200, error: Exception | None = None) -> None:
        self.bodies, self.status, self.error, self.requests = list(bodies), status, error, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.error is not None:
            raise self.error
        body = self.bodies.pop(0) if len(self.bodies) > 1 else self.bodies[0]
        return httpx.Response(self.status, text=body)


def _source(exporter: Exporter, health: SourceHealth | None = None) -> DcgmSource:
    client = httpx.Client(transport=httpx.MockTransport(exporter))
    clock = iter(float(t) for t in range(1_795_000_000, 1_795_001_000, 10))
    return DcgmSource(
        node="lke-node",
        client=client,
        clock=lambda: next(clock),
        health=health or SourceHealth("d"),
    )


def _later(text: str, **changes: str) -> str:
    """A later scrape of the same exporter: the real text with some values changed."""
    lines = []
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        if name in changes and not line.startswith("#"):
            line = line.rsplit(" ", 1)[0] + " " + changes[name]
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_real_scrape_maps_fields_identity_profiling_and_pod() -> None:
    obs = _source(Exporter(LKE)).collect()
    (gpu,) = obs.gpus
    assert (gpu.uuid, gpu.index, gpu.pci_bus_id) == (UUID, 0, "0000:00:02.0")
    assert gpu.name == "NVIDIA RTX 4000 Ada Generation" and gpu.driver_version == "580.95.05"
    (s,) = obs.samples
    assert (s.sm_clock_mhz, s.power_w, s.temp_gpu, s.util_gpu) == (2310, 40.979, 48, 0)
    assert s.mem_used_mb == 1 and s.mem_total_mb == 1 + 20015 + 457
    assert s.energy_mj == 455497156 and s.pcie_replay == 0
    assert s.remapped_uncorrectable == 0 and s.remap_failure is False
    assert s.extra is not None
    assert s.extra["prof_gr_engine_active"] == pytest.approx(0.004656)
    assert s.extra["prof_pcie_tx_bytes"] == 78398480 and s.extra["dev_mem_clock"] == 9001
    (alloc,) = obs.allocations
    assert alloc.scheduler is Scheduler.KUBERNETES
    assert alloc.job_id == "default/cuda-75454ffb9f-8ljq7" and alloc.gpu_uuid == UUID
    assert obs.events == []  # XID 0, no remap failure, no DBE


def test_changes_between_scrapes_become_events() -> None:
    later = _later(
        LKE,
        DCGM_FI_DEV_XID_ERRORS="79",
        DCGM_FI_DEV_ROW_REMAP_FAILURE="1",
        DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS="2",
    ).replace(
        'err_code="0",err_msg="No Error"', 'err_code="79",err_msg="GPU has fallen off the bus"'
    )
    src = _source(Exporter(LKE, later))
    src.collect()
    events = src.collect().events
    xid = next(e for e in events if e.kind is EventKind.XID)
    assert xid.code == 79 and xid.gpu_uuid == UUID and xid.pci_bus_id == "0000:00:02.0"
    assert xid.payload["err_msg"] == "GPU has fallen off the bus" and xid.source == "dcgm"
    assert xid.job_id == "default/cuda-75454ffb9f-8ljq7"
    assert xid.payload["labels"]["Hostname"] == "lke529760-766837-0a634ab30000"
    assert xid.payload["workloads"][0]["container"] == "cuda"
    remap = [e for e in events if e.kind is EventKind.ROW_REMAP]
    assert {e.severity for e in remap} == {Severity.CRITICAL, Severity.ERROR}
    rows = next(e for e in remap if "delta" in e.payload)
    assert rows.payload["delta"] == 2 and rows.payload["field"] == "remapped_uncorrectable"
    assert src.collect().events == []  # the same values again: nothing new


def test_first_scrape_reports_what_it_states_as_a_snapshot() -> None:
    bad = _later(LKE, DCGM_FI_DEV_XID_ERRORS="48")
    (ev,) = _source(Exporter(bad)).collect().events
    assert ev.kind is EventKind.XID and ev.code == 48 and ev.payload["snapshot"] is True


def test_xid_window_count_rise_is_an_event_with_count() -> None:
    count = (
        "# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge\n"
        f'DCGM_EXP_XID_ERRORS_COUNT{{gpu="0",UUID="{UUID}",device="nvidia0",xid="{{xid}}",'
        'window_size_in_ms="300000"} {n}\n'
    )
    first = LKE + count.replace("{xid}", "13").replace("{n}", "1")
    second = LKE + count.replace("{xid}", "13").replace("{n}", "4")
    src = _source(Exporter(first, second))
    src.collect()
    (ev,) = src.collect().events
    assert (ev.kind, ev.code, ev.count) == (EventKind.XID, 13, 3)


def test_readme_sample_elisions_are_counted_and_sentinels_dropped() -> None:
    health = SourceHealth("dcgm-readme")
    obs = _source(Exporter((FIX / "readme_k8s_quickstart.prom").read_text()), health).collect()
    assert health.parse_failures["exposition_line"] == 2  # the two "..." lines
    (s,) = obs.samples
    assert s.sm_clock_mhz == 139 and s.temp_mem is None  # 9223372036854775794 = not supported


def test_truncated_scrape_keeps_every_complete_sample() -> None:
    health = SourceHealth("dcgm-trunc")
    obs = _source(Exporter((FIX / "issue58_titanv_truncated.prom").read_text()), health).collect()
    assert len(obs.samples) == 5 and health.parse_failures["exposition_line"] == 1
    assert sorted(g.index or 0 for g in obs.gpus) == [0, 1, 2, 3, 4]
    assert obs.allocations == []  # empty pod labels name no workload


def test_mig_instances_fold_into_their_gpu_with_pods() -> None:
    obs = _source(Exporter((FIX / "issue512_h100_mig_prof.prom").read_text())).collect()
    (gpu,) = obs.gpus
    assert gpu.mig_mode is True and gpu.pci_bus_id == "0000:1a:00.0"
    (s,) = obs.samples
    assert s.extra is not None and {
        "prof_gr_engine_active@gi7",
        "prof_gr_engine_active@gi9",
    } <= set(s.extra)
    assert {a.job_id for a in obs.allocations} == {
        "model-playground-stg/text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
        "model-playground-stg/tts-predictor-00011-deployment-5554f75554-8j8pl",
    }


def test_http_errors_and_timeouts_are_counted_not_raised() -> None:
    health = SourceHealth("dcgm-http")
    assert _source(Exporter("oops", status=503), health).collect().is_empty()
    timeout = Exporter("", error=httpx.ReadTimeout("timed out"))
    assert _source(timeout, health).collect().is_empty()
    refused = Exporter("", error=httpx.ConnectError("connection refused"))
    assert _source(refused, health).collect().is_empty()
    assert health.errors["http_503"] == 1 and health.errors["http_timeout"] == 1
    assert health.errors["http_error"] == 1


def test_garbage_body_is_counted_and_gives_nothing() -> None:
    health = SourceHealth("dcgm-garbage")
    obs = _source(Exporter("<html>502 Bad Gateway</html>\n\x00\xff{{{\n"), health).collect()
    assert obs.is_empty() and health.total_parse_failures() == 2


def test_parse_dcgm_text_for_explain_states_the_problems_of_one_scrape() -> None:
    text = _later(LKE, DCGM_FI_DEV_ROW_REMAP_FAILURE="1")
    gpus, events = parse_dcgm_text(text, node="n1")
    assert [g.uuid for g in gpus] == [UUID]
    assert [(e.kind, e.node) for e in events] == [(EventKind.ROW_REMAP, "n1")]


def _with_counters(text: str, dbe: int, crc: int) -> str:
    """The real scrape plus ECC/NVLink counter lines in its own label format."""
    labels = next(ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_SM_CLOCK{"))
    labels = labels[len("DCGM_FI_DEV_SM_CLOCK") :].rsplit(" ", 1)[0]
    return text + (
        "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n"
        f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{labels} {dbe}\n"
        "# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter\n"
        f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{labels} {crc}\n"
        "# TYPE DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL counter\n"
        f"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL{labels} 1\n"
    )


def test_ecc_and_nvlink_counter_rises_are_events_with_deltas() -> None:
    src = _source(Exporter(_with_counters(LKE, 0, 5), _with_counters(LKE, 2, 9)))
    first = src.collect()
    assert first.events == [] and first.samples[0].nvlink_crc_errors == 6  # FLIT + DATA
    events = src.collect().events
    ecc = next(e for e in events if e.kind is EventKind.ECC)
    assert (ecc.payload["ecc"], ecc.payload["scope"], ecc.payload["delta"]) == (
        "dbe",
        "volatile",
        2,
    )
    assert ecc.severity is Severity.ERROR
    nvl = next(e for e in events if e.kind is EventKind.NVLINK)
    assert nvl.payload["delta"] == 4 and nvl.payload["value"] == 10
