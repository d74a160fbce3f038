"""What the node-side sources emit goes through the real store (SQLite and PostgreSQL) intact,
and a restart's re-read stores nothing twice."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import httpx
from sqlalchemy.orm import Session

from collector.base import Observations
from collector.dcgm import DcgmSource
from collector.health import SourceHealth
from collector.kmsg import KmsgSource
from timeline import queries, service
from timeline.models import Batch, EventKind

FIX = Path(__file__).parent.parent / "fixtures"
BOOT = 1_795_348_860.0


def _store(session: Session, obs: Observations, node: str) -> None:
    batch = Batch(
        agent="test-agent",
        node=node,
        batch_id=uuid.uuid4().hex,
        gpus=obs.gpus,
        samples=obs.samples,
        events=obs.events,
        allocations=obs.allocations,
    )
    service.append_batch(session, batch=batch, received_ts=BOOT + 5000)
    session.commit()


def _kmsg(tmp_path: Path, kmsg: Path) -> KmsgSource:
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("7b3c2e4a-0d7e-4a44-9f3a-3c1f0a2b5d6e\n")
    return KmsgSource(
        node="gpu-node-07",
        kmsg_path=str(kmsg),
        boot_id_path=str(boot_id),
        state_path=None,
        boot_ts=BOOT,
        clock=lambda: BOOT + 4000.0,
        health=SourceHealth("kmsg-store"),
    )


def test_kernel_events_round_trip_and_a_reread_stores_nothing_twice(
    session: Session, tmp_path: Path
) -> None:
    kmsg = tmp_path / "kmsg"
    shutil.copy(FIX / "kernel" / "kmsg_records.txt", kmsg)
    # No state file: a restarted agent that lost it reads the whole buffer again.
    _store(session, _kmsg(tmp_path, kmsg).collect(), "gpu-node-07")
    _store(session, _kmsg(tmp_path, kmsg).collect(), "gpu-node-07")
    rows = queries.events_in_window(session, node="gpu-node-07")
    assert [(r["kind"], r["code"]) for r in rows] == [("xid", 31), ("xid", 43), ("gpu_lost", None)]
    x31 = rows[0]
    assert x31["pci_bus_id"] == "0000:00:06.0" and x31["payload"]["process_name"] == "python3"
    assert x31["raw"].startswith("4,813,24568904,-;NVRM: Xid (PCI:0000:00:06): 31")
    assert x31["gpu_uuid"] == "GPU-25179923-e6d8-2c49-9579-04b41661425f"


def test_dcgm_scrape_round_trips_samples_gpus_allocations_and_events(session: Session) -> None:
    text = (FIX / "dcgm" / "lke_rtx4000ada_pod_labels.prom").read_text()
    bad = text.replace(
        'err_code="0",err_msg="No Error",', 'err_code="79",err_msg="GPU has fallen off the bus",'
    ).replace("No Error", "x")
    lines = [
        ln.rsplit(" ", 1)[0] + " 79" if ln.startswith("DCGM_FI_DEV_XID_ERRORS{") else ln
        for ln in bad.splitlines()
    ]
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, text="\n".join(lines) + "\n"))
    )
    src = DcgmSource(node="lke-node", client=client, clock=lambda: BOOT, health=SourceHealth("d"))
    _store(session, src.collect(), "lke-node")
    (gpu,) = queries.latest_gpu_samples(session, node="lke-node")
    assert gpu["uuid"] == "GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c"
    assert gpu["sm_clock_mhz"] == 2310 and gpu["power_w"] == 40.979
    (ev,) = queries.events_in_window(session, node="lke-node", kind=EventKind.XID.value)
    assert ev["code"] == 79 and ev["source"] == "dcgm"
    assert ev["job_id"] == "default/cuda-75454ffb9f-8ljq7"
    # The pod's job row comes from the Kubernetes source; DCGM records that it holds the GPU.
    assert queries.count_rows(session, table="allocations") == 1
