"""The sample store seam on both SQL backends: writes, newest per GPU, window aggregates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy.orm import Session

from timeline import samples, service
from timeline.models import Batch, Sample, SampleRow
from timeline.samples_pg import COPY_FROM_ROWS
from timeline.samples_sql import SqlSampleStore

NOW = 1_800_000_000.0


def _store_rows(session: Session, rows: Sequence[Sample], node: str = "n1") -> None:
    light = [SampleRow.of(r) for r in rows]
    assert samples.store().append(session, node=node, samples=light) == len(rows)
    session.commit()


def test_latest_returns_each_gpus_newest_sample(session: Session) -> None:
    _store_rows(
        session,
        [
            Sample(ts=NOW - 20, gpu_uuid="GPU-a", util_gpu=10.0),
            Sample(ts=NOW - 10, gpu_uuid="GPU-a", util_gpu=20.0, power_w=300.5),
            Sample(ts=NOW - 30, gpu_uuid="GPU-b", util_gpu=5.0),
        ],
    )
    latest = samples.store().latest(session)
    assert latest["GPU-a"]["util_gpu"] == 20.0
    assert latest["GPU-a"]["power_w"] == 300.5
    assert latest["GPU-a"]["ts"] == NOW - 10
    assert latest["GPU-b"]["util_gpu"] == 5.0
    assert set(samples.store().latest(session, uuids=["GPU-b"])) == {"GPU-b"}


def test_latest_reads_only_the_fields_asked_for(session: Session) -> None:
    _store_rows(session, [Sample(ts=NOW - 10, gpu_uuid="GPU-a", util_gpu=20.0, power_w=300.5)])
    latest = samples.store().latest(session, fields=["util_gpu"])
    assert latest == {"GPU-a": {"gpu_uuid": "GPU-a", "ts": NOW - 10, "util_gpu": 20.0}}


def test_newest_within_names_gpus_whose_newest_values_meet_inclusive_bounds(
    session: Session,
) -> None:
    _store_rows(
        session,
        [
            Sample(ts=NOW - 20, gpu_uuid="GPU-spin", util_gpu=100.0, power_w=300.0),
            Sample(ts=NOW - 10, gpu_uuid="GPU-spin", util_gpu=100.0, power_w=135.0),
            Sample(ts=NOW - 10, gpu_uuid="GPU-edge", util_gpu=90.0, power_w=200.0),
            Sample(ts=NOW - 10, gpu_uuid="GPU-busy", util_gpu=100.0, power_w=620.0),
            Sample(ts=NOW - 10, gpu_uuid="GPU-nopower", util_gpu=100.0),
            Sample(ts=NOW - 100, gpu_uuid="GPU-old", util_gpu=100.0, power_w=135.0),
            Sample(ts=NOW + 5, gpu_uuid="GPU-late", util_gpu=0.0, power_w=60.0),
        ],
    )
    every = ["GPU-spin", "GPU-edge", "GPU-busy", "GPU-nopower", "GPU-old", "GPU-late", "GPU-x"]
    spin = {"util_gpu": (90.0, None), "power_w": (None, 200.0)}
    args: dict[str, Any] = {"uuids": every, "since": NOW - 45, "until": NOW}
    # Newer than the window's end: the store cannot tell its values in the window, so it says.
    got = samples.store().newest_within(session, **args, bounds=spin)
    assert got == {"GPU-spin", "GPU-edge", "GPU-late"}
    some = samples.store().newest_within(session, **args | {"uuids": ["GPU-busy"]}, bounds={})
    assert some == {"GPU-busy"}
    assert samples.store().newest_within(session, **args | {"uuids": []}, bounds=spin) == set()


def test_field_range_gives_each_gpus_lowest_and_highest_value(session: Session) -> None:
    _store_rows(
        session,
        [
            Sample(ts=NOW - 30, gpu_uuid="GPU-a", power_w=70.0),
            Sample(ts=NOW - 20, gpu_uuid="GPU-a"),
            Sample(ts=NOW - 10, gpu_uuid="GPU-a", power_w=610.0),
            Sample(ts=NOW - 500, gpu_uuid="GPU-a", power_w=5.0),
            Sample(ts=NOW - 10, gpu_uuid="GPU-b", util_gpu=3.0),
        ],
    )
    got = samples.store().field_range(
        session, uuids=["GPU-a", "GPU-b"], since=NOW - 60, until=NOW, field="power_w"
    )
    assert got == {"GPU-a": (70.0, 610.0)}


def test_window_stats_count_nulls_per_field_and_bound_the_window(session: Session) -> None:
    _store_rows(
        session,
        [
            Sample(ts=NOW - 100, gpu_uuid="GPU-a", util_gpu=99.0, power_w=120.0),  # outside
            Sample(ts=NOW - 50, gpu_uuid="GPU-a", util_gpu=90.0, power_w=130.0),
            Sample(ts=NOW - 40, gpu_uuid="GPU-a", power_w=110.0),
            Sample(ts=NOW - 30, gpu_uuid="GPU-a", util_gpu=95.0),
        ],
    )
    stats = samples.store().window_stats(
        session, uuids=["GPU-a", "GPU-x"], since=NOW - 50, until=NOW, fields=["util_gpu", "power_w"]
    )
    assert set(stats) == {"GPU-a"}
    w = stats["GPU-a"]
    assert (w.first_ts, w.last_ts, w.count) == (NOW - 50, NOW - 30, 3)
    util, power = w.fields["util_gpu"], w.fields["power_w"]
    assert (util.min, util.max, util.count) == (90.0, 95.0, 2)
    assert (util.first_ts, util.last_ts) == (NOW - 50, NOW - 30)
    assert (power.min, power.max, power.count) == (110.0, 130.0, 2)
    assert (power.first_ts, power.last_ts) == (NOW - 50, NOW - 40)


def test_window_stats_of_a_boolean_field_count_and_order_false_before_true(
    session: Session,
) -> None:
    _store_rows(
        session,
        [
            Sample(ts=NOW - 50, gpu_uuid="GPU-a", remap_pending=False),
            Sample(ts=NOW - 40, gpu_uuid="GPU-a", remap_pending=True),
            Sample(ts=NOW - 30, gpu_uuid="GPU-a"),
        ],
    )
    stats = samples.store().window_stats(
        session, uuids=["GPU-a"], since=NOW - 60, until=NOW, fields=["remap_pending"]
    )
    pending = stats["GPU-a"].fields["remap_pending"]
    assert (pending.min, pending.max, pending.count) == (0, 1, 2)


def test_last_above_honours_inclusive_threshold(session: Session) -> None:
    _store_rows(
        session,
        [
            Sample(ts=NOW - 30, gpu_uuid="GPU-a", util_gpu=80.0),
            Sample(ts=NOW - 20, gpu_uuid="GPU-a", util_gpu=50.0),
            Sample(ts=NOW - 10, gpu_uuid="GPU-a", util_gpu=10.0),
        ],
    )

    def above(threshold: float, inclusive: bool = False) -> dict[str, float]:
        return samples.store().last_above(
            session, uuids=["GPU-a"], field="util_gpu", threshold=threshold,
            since=NOW - 60, until=NOW, inclusive=inclusive,
        )  # fmt: skip

    assert above(50.0) == {"GPU-a": NOW - 30}
    assert above(50.0, inclusive=True) == {"GPU-a": NOW - 20}
    assert above(90.0) == {}


def test_series_and_node_utilization_average_per_bucket(session: Session) -> None:
    _store_rows(
        session,
        [
            Sample(ts=NOW, gpu_uuid="GPU-a", util_gpu=10.0),
            Sample(ts=NOW + 30, gpu_uuid="GPU-a", util_gpu=30.0),
            Sample(ts=NOW + 60, gpu_uuid="GPU-a", util_gpu=70.0),
        ],
    )
    store = samples.store()
    series = store.series(
        session, uuids=["GPU-a"], since=NOW, until=NOW + 120, bucket_s=60, fields=["util_gpu"]
    )
    assert series == {"GPU-a": [{"ts": NOW, "util_gpu": 20.0}, {"ts": NOW + 60, "util_gpu": 70.0}]}
    heat = store.node_utilization(session, since=NOW, until=NOW + 60, bucket_s=60)
    assert heat == [("n1", NOW, 20.0)]


class _Recording(SqlSampleStore):
    def __init__(self) -> None:
        self.appended = 0

    def append(self, session: Session, *, node: str, samples: Sequence[SampleRow]) -> int:
        self.appended += len(samples)
        return super().append(session, node=node, samples=samples)


def test_use_swaps_the_process_store_and_returns_the_old_one(session: Session) -> None:
    recording = _Recording()
    old = samples.use(recording)
    try:
        batch = Batch(
            agent="a", node="n1", batch_id="batch-0001", samples=[Sample(ts=NOW, gpu_uuid="GPU-a")]
        )
        service.append_batch(session, batch=batch, received_ts=NOW)
        assert recording.appended == 1
    finally:
        assert samples.use(old) is recording
    assert samples.store() is old


def test_latest_takes_the_newest_row_whole_and_ignores_a_late_older_one(session: Session) -> None:
    _store_rows(session, [Sample(ts=NOW, gpu_uuid="GPU-a", util_gpu=10.0, power_w=100.0)])
    _store_rows(session, [Sample(ts=NOW + 10, gpu_uuid="GPU-a", util_gpu=20.0)])
    _store_rows(session, [Sample(ts=NOW + 5, gpu_uuid="GPU-a", power_w=999.0)])  # late, older
    latest = samples.store().latest(session)["GPU-a"]
    assert (latest["ts"], latest["util_gpu"], latest["power_w"]) == (NOW + 10, 20.0, None)


def test_a_second_sample_of_a_gpu_in_the_same_millisecond_is_dropped_not_fatal(
    session: Session,
) -> None:
    _store_rows(session, [Sample(ts=NOW, gpu_uuid="GPU-a", util_gpu=10.0)])
    again = [Sample(ts=NOW, gpu_uuid="GPU-a", util_gpu=50.0), Sample(ts=NOW, gpu_uuid="GPU-b")]
    _store_rows(session, again)
    stats = samples.store().window_stats(
        session, uuids=["GPU-a", "GPU-b"], since=NOW, until=NOW, fields=["util_gpu"]
    )
    assert stats["GPU-a"].count == 1 and stats["GPU-a"].fields["util_gpu"].max == 10.0
    assert stats["GPU-b"].count == 1
    assert samples.store().latest(session)["GPU-a"]["util_gpu"] == 10.0  # the one stored


@pytest.mark.parametrize("gpus", [2, COPY_FROM_ROWS + 6], ids=["agent-batch", "copy-batch"])
def test_a_resent_sample_is_skipped_and_the_rest_of_its_batch_stored_at_any_batch_size(
    session: Session, gpus: int
) -> None:
    # PostgreSQL writes small batches with INSERT ... ON CONFLICT and large ones with COPY,
    # which falls back to that INSERT on a stored (GPU, millisecond): both must agree.
    _store_rows(session, [Sample(ts=NOW, gpu_uuid="GPU-0", util_gpu=10.0)])
    batch = [Sample(ts=NOW, gpu_uuid=f"GPU-{i}", util_gpu=20.0 + i) for i in range(gpus)]
    _store_rows(session, batch)
    uuids = [f"GPU-{i}" for i in range(gpus)]
    stats = samples.store().window_stats(
        session, uuids=uuids, since=NOW, until=NOW, fields=["util_gpu"]
    )
    assert {u: s.count for u, s in stats.items()} == dict.fromkeys(uuids, 1)
    assert stats["GPU-0"].fields["util_gpu"].max == 10.0  # the one stored first
    assert stats[uuids[-1]].fields["util_gpu"].max == 20.0 + gpus - 1


def test_every_field_kind_round_trips_through_the_store_with_nulls_and_extra(
    session: Session,
) -> None:
    full = SampleRow(
        NOW,
        "GPU-a",
        util_gpu=93.5,
        temp_mem=-12.25,
        clock_event_reasons=2**62,
        remapped_correctable=7,
        remap_pending=True,
        remap_failure=False,
        energy_mj=1e17,
        extra={"sm_active": 0.5, 'k\\"q': -1e15},
    )
    sparse = SampleRow(NOW + 1, "GPU-b", util_gpu=None, remap_pending=None)
    assert samples.store().append(session, node="n1", samples=[full, sparse]) == 2
    session.commit()
    latest = samples.store().latest(session)
    for row in (full, sparse):
        got = latest[row.gpu_uuid]
        assert {f: got[f] for f in SampleRow._fields} == row._asdict()


def test_two_samples_of_a_gpu_in_one_millisecond_of_one_batch_keep_the_first(
    session: Session,
) -> None:
    # Out of GPU order on purpose: the store sorts by GPU (stably) before writing.
    batch = [
        Sample(ts=NOW, gpu_uuid="GPU-b", util_gpu=1.0),
        Sample(ts=NOW, gpu_uuid="GPU-a", util_gpu=10.0),
        Sample(ts=NOW, gpu_uuid="GPU-a", util_gpu=50.0),
        Sample(ts=NOW + 1, gpu_uuid="GPU-b", util_gpu=2.0),
    ]
    _store_rows(session, batch)
    stats = samples.store().window_stats(
        session, uuids=["GPU-a", "GPU-b"], since=NOW, until=NOW + 1, fields=["util_gpu"]
    )
    assert stats["GPU-a"].count == 1 and stats["GPU-a"].fields["util_gpu"].max == 10.0
    assert stats["GPU-b"].count == 2
    latest = samples.store().latest(session)
    assert (latest["GPU-a"]["util_gpu"], latest["GPU-b"]["util_gpu"]) == (10.0, 2.0)


def test_numbers_printed_in_exponent_form_or_at_the_int64_edge_round_trip(
    session: Session,
) -> None:
    # PostgreSQL gets numbers as text (COPY, array literals): 1.5e-07 prints as "1.5e-7" there.
    row = SampleRow(
        NOW, "GPU-e", util_gpu=0.5, energy_mj=1.5e-7, clock_event_reasons=2**63 - 1, pcie_replay=0
    )
    other = SampleRow(NOW, "GPU-f", energy_mj=2.5e16, clock_event_reasons=-(2**63))
    assert samples.store().append(session, node="n1", samples=[row, other]) == 2
    session.commit()
    latest = samples.store().latest(session)
    for r in (row, other):
        assert {f: latest[r.gpu_uuid][f] for f in SampleRow._fields} == r._asdict()
