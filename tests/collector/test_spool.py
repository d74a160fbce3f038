"""The agent's spool: durable puts, persisted batch ids, bounds, split and quarantine."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from collector.base import Observations
from collector.spool import Spool
from timeline.models import Batch, Event, EventKind, Sample


def _samples(n: int, start: float = 1.0) -> Observations:
    return Observations(
        samples=[Sample(ts=start + i, gpu_uuid="GPU-a", util_gpu=float(i)) for i in range(n)]
    )


def _event(ts: float) -> Observations:
    return Observations(events=[Event(ts=ts, source="nvml", kind=EventKind.XID, code=31)])


def test_batch_body_is_a_valid_ingest_batch(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.db")
    obs = _samples(3)
    obs.extend(_event(5.0))
    spool.put(obs)
    batch = spool.take()
    assert batch is not None
    parsed = Batch.model_validate_json(batch.body(agent="a", node="n1"))
    assert parsed.batch_id == batch.batch_id
    assert [s.util_gpu for s in parsed.samples] == [0.0, 1.0, 2.0]
    assert parsed.events[0].code == 31


def test_unacked_batch_is_handed_out_again_with_the_same_id_and_items(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.db")
    spool.put(_samples(5))
    first = spool.take(max_items=3)
    spool.put(_samples(2, start=100))
    again = spool.take(max_items=3)
    assert first is not None and again is not None
    assert again.batch_id == first.batch_id
    assert again.items == first.items
    assert spool.ack(first.batch_id) == 3
    rest = spool.take(max_items=100)
    assert rest is not None and rest.batch_id != first.batch_id
    assert rest.size() == 4  # the 2 left of the first put and the 2 of the second


def test_batch_id_survives_reopening_the_file(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.db")
    spool.put(_samples(4))
    batch = spool.take()
    assert batch is not None
    spool.close()
    reopened = Spool(tmp_path / "s.db")
    assert reopened.pending_batch_ids() == [batch.batch_id]
    again = reopened.take()
    assert again is not None and again.batch_id == batch.batch_id and again.size() == 4


def test_counters_count_produced_and_delivered(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.db")
    spool.put(_samples(7))
    spool.put(_event(1.0))
    batch = spool.take()
    assert batch is not None
    spool.ack(batch.batch_id)
    counters = spool.counters()
    assert counters["produced_samples"] == 7 and counters["produced_events"] == 1
    assert counters["delivered_samples"] == 7 and counters["delivered_events"] == 1
    assert spool.pending() == 0 and spool.take() is None


def test_full_spool_drops_oldest_samples_and_never_events(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.db", max_rows=10)
    spool.put(_event(0.5))
    spool.put(_samples(20))
    spool.put(_event(99.0))
    assert spool.pending() == 10
    assert spool.counters()["dropped_samples"] == 12
    batch = spool.take(max_items=100)
    assert batch is not None
    assert len(batch.items["events"]) == 2
    kept = [json.loads(s)["util_gpu"] for s in batch.items["samples"]]
    assert kept == [float(i) for i in range(12, 20)]  # the newest samples stay


def test_events_are_kept_past_the_bound(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.db", max_rows=3)
    for i in range(6):
        spool.put(_event(float(i)))
    assert spool.pending() == 6
    assert spool.counters().get("dropped_samples", 0) == 0


def test_split_replaces_a_batch_by_two_persisted_halves(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.db")
    spool.put(_samples(5))
    batch = spool.take()
    assert batch is not None
    halves = spool.split(batch.batch_id)
    assert len(halves) == 2 and batch.batch_id not in halves
    assert spool.pending_batch_ids() == halves
    first = spool.take()
    assert first is not None and first.batch_id == halves[0] and first.size() == 2
    spool.ack(first.batch_id)
    second = spool.take()
    assert second is not None and second.batch_id == halves[1] and second.size() == 3


def test_quarantine_moves_a_batch_to_dead_letters_item_by_item_and_counts_it(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "s.db")
    spool.put(_samples(3))
    batch = spool.take()
    assert batch is not None
    assert spool.quarantine(batch.batch_id, status=422, detail="samples.0.ts: bad") == 3
    assert spool.pending() == 0 and spool.take() is None
    dead = spool.dead_letters()
    assert [(d["batch_id"], d["kind"], d["status"]) for d in dead] == [
        (batch.batch_id, "samples", 422)
    ] * 3
    assert spool.counters()["quarantined_batches"] == 1
    assert spool.counters()["quarantined_items"] == 3 == spool.counters()["dead_lettered_items"]


def test_ack_dead_letters_the_items_the_server_rejected_and_counts_the_rest(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "s.db")
    spool.put(_samples(4))
    batch = spool.take()
    assert batch is not None
    assert spool.ack(batch.batch_id, rejected={("samples", 2): (422, "samples.2.ts: bad")}) == 3
    (dead,) = spool.dead_letters()
    assert dead["body"] == batch.items["samples"][2] and dead["detail"] == "samples.2.ts: bad"
    assert spool.counters()["delivered_samples"] == 3 and spool.pending() == 0


def test_a_spool_written_by_an_older_agent_opens_and_keeps_its_batch(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:  # the batches table before the failures column
        old.execute(
            "CREATE TABLE batches (batch_id TEXT PRIMARY KEY, created_ts REAL NOT NULL, "
            "attempts INTEGER NOT NULL DEFAULT 0)"
        )
        old.execute("INSERT INTO batches VALUES ('old-batch', 1.0, 3)")
        old.execute(
            "CREATE TABLE dead_letter (batch_id TEXT PRIMARY KEY, ts REAL NOT NULL, "
            "status INTEGER, detail TEXT, body TEXT NOT NULL)"
        )
        old.execute("INSERT INTO dead_letter VALUES ('dead-one', 2.0, 422, 'bad', '{}')")
    spool = Spool(path)
    assert spool.pending_batch_ids() == ["old-batch"]
    assert spool.record_failure("old-batch") == 1
    (dead,) = spool.dead_letters()  # what the older agent quarantined stays listed
    assert (dead["batch_id"], dead["kind"], dead["status"]) == ("dead-one", "batch", 422)


_CHILD = """
import sys, time
from collector.spool import Spool
from collector.base import Observations
from timeline.models import Sample
spool = Spool(sys.argv[1])
spool.put(Observations(samples=[Sample(ts=0.0, gpu_uuid="GPU-a")]))
batch = spool.take()
print("batch", batch.batch_id, flush=True)
i = 0
while True:
    i += 1
    spool.put(Observations(samples=[Sample(ts=float(i), gpu_uuid="GPU-a")]))
    print("put", i, flush=True)
"""


def test_sigkill_mid_way_loses_no_committed_put_and_resends_the_same_batch(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None
    batch_id = child.stdout.readline().split()[1]
    acknowledged = 0
    while acknowledged < 50:
        acknowledged = int(child.stdout.readline().split()[1])
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    spool = Spool(path)
    assert spool.pending_batch_ids() == [batch_id]
    resent = spool.take()
    assert resent is not None and resent.batch_id == batch_id and resent.size() == 1
    # Every put the child reported done was committed before it reported it.
    assert spool.counters()["produced_samples"] >= acknowledged + 1
    assert spool.pending() == spool.counters()["produced_samples"]
