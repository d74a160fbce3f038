"""The VictoriaMetrics samples store against the real binary: every read answers what the SQL
store answers for the same samples, hostile label values included; an outage is a 503."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from correlator import hang, idle, lifecycle
from correlator.models import Incident
from tests.helpers.services import victoriametrics
from timeline import history, queries, service
from timeline.db import unit_of_work
from timeline.models import GpuInfo, Sample
from timeline.samples_vm import FIELDS, VmSampleStore
from timeline.vm_client import VmClient

pytestmark = pytest.mark.integration

# Everything the bounds let through that MetricsQL treats specially: quotes, backslashes,
# braces, regex and label syntax, non-ASCII.
HOSTILE = 'n"1\\{x}=~|.*,gpu="a"} or vector(1) #ü\\'
NODES = {"GPU-a": "node-a", "GPU-b": HOSTILE, "GPU-c": HOSTILE}
T0 = float(int(time.time()) - 1800)  # within the store's latest lookback
STEP = 10.0


@pytest.fixture(scope="module")
def vm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real VictoriaMetrics for this module."""
    with victoriametrics(tmp_path_factory.mktemp("vm")) as url:
        yield url


@pytest.fixture()
def store(vm_url: str) -> Iterator[VmSampleStore]:
    """A VM store, emptied after each test."""
    with httpx.Client(timeout=10) as client:
        vm = VmClient(vm_url, client=client)
        yield VmSampleStore(vm)
        vm.delete('{__name__=~"fleetmedic_gpu_.+"}')


def _sample(gpu: str, i: int) -> Sample:
    ts = T0 + i * STEP + 0.25  # not on a whole second: millisecond precision matters
    if gpu == "GPU-a":  # busy for 10 minutes, then idle: busy only early in a late window
        util, power = (95.0, 600.0) if i < 60 else (0.0, 70.0)
    elif gpu == "GPU-b":  # idle at 3%, one sample exactly at the threshold
        util, power = (5.0 if i == 100 else 3.0), 65.0
    else:  # spins at full utilization; every 7th row without utilization, every 5th no power
        util, power = 100.0, 135.0
    return Sample(
        ts=ts,
        gpu_uuid=gpu,
        util_gpu=None if gpu == "GPU-c" and i % 7 == 0 else util,
        power_w=None if gpu == "GPU-c" and i % 5 == 0 else power,
        mem_used_mb=1000.0 + i,
        temp_gpu=40.0 + (i % 3),
        ecc_sbe_volatile=i // 50,
        remap_pending=i > 170,
    )


def _load(session_factory: sessionmaker[Session], store: VmSampleStore) -> None:
    by_node: dict[str, list[Sample]] = {}
    for gpu, node in NODES.items():
        by_node.setdefault(node, []).extend(_sample(gpu, i) for i in range(180))
    with unit_of_work(session_factory) as s:
        gpus = [GpuInfo(uuid=g, node=n, index=i) for i, (g, n) in enumerate(NODES.items())]
        service.upsert_gpus(s, gpus=gpus, now=T0)
        for node, rows in by_node.items():
            service.append_samples(s, node=node, samples=rows)
    for node, rows in by_node.items():
        store.append(node=node, samples=rows)
    store.vm.flush()


def test_vm_store_answers_every_read_like_sql(
    session_factory: sessionmaker[Session], store: VmSampleStore
) -> None:
    _load(session_factory, store)
    end = T0 + 179 * STEP + 0.25
    uuids = sorted(NODES)
    with session_factory() as s:
        sql_latest = {r["uuid"]: r for r in queries.latest_gpu_samples(s)}
        vm_latest = store.latest()
        assert set(vm_latest) == set(sql_latest)
        for gpu, row in vm_latest.items():
            assert row["node"] == NODES[gpu]
            assert row["ts"] == pytest.approx(sql_latest[gpu]["ts"])
            assert {f: row[f] for f in FIELDS} == {f: sql_latest[gpu][f] for f in FIELDS}
        assert set(store.latest(node=HOSTILE)) == {"GPU-b", "GPU-c"}

        for since, until in [(end - 600, end), (T0 + 0.25, T0 + 590.25), (end - 595.0, end - 5)]:
            sql_hang = hang._windows(s, set(uuids), since, until)
            vm_hang = store.hang_windows(uuids=uuids, since=since, until=until)
            assert set(vm_hang) == set(sql_hang)
            for gpu, (lo, hi, umin, pmin, pmax, n, nu, np_) in vm_hang.items():
                got = (lo, hi, umin if nu == n else None, pmin, pmax if np_ == n else None)
                want = sql_hang[gpu]
                _close(
                    got,
                    (want.first_ts, want.last_ts, want.min_util, want.min_power, want.max_power),
                )

            sql_idle = idle._window_stats(s, uuids, since, until, 5.0)
            _close(
                store.idle_windows(uuids=uuids, since=since, until=until, threshold=5.0), sql_idle
            )

        incidents = [
            Incident(
                fingerprint=g, title=g, culprit_gpu_uuid=g, opened_ts=T0, last_seen_ts=T0 + 300
            )
            for g in uuids
        ]
        for threshold in (5.0, 50.0, 100.0):
            sql_busy = lifecycle._gpus_busy_since(s, incidents, threshold, end)
            vm_busy = store.last_above(uuids=uuids, since=T0 + 300, until=end, threshold=threshold)
            _close(vm_busy, sql_busy)

        for bucket in (60, 300, 3600):
            sql_series = history.gpu_series(s, uuids=uuids, since=T0, until=end, bucket_s=bucket)
            _close(store.series(uuids=uuids, since=T0, until=end, bucket_s=bucket), sql_series)
            sql_nodes = history.node_utilization(s, since=T0, until=end, bucket_s=bucket)
            vm_nodes = store.node_utilization(since=T0, until=end, bucket_s=bucket)
            _close(sorted(vm_nodes), sorted(sql_nodes))


def _close(got: Any, want: Any) -> None:
    """Equal, floats within 1e-6 relative (VictoriaMetrics keeps milliseconds and float64)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (got, want)
        for k in want:
            _close(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want, strict=True):
            _close(g, w)
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=1e-6), (got, want)
    else:
        assert got == want, (got, want)
