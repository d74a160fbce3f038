"""Rollups and retention of the SQL sample store, on both backends: minute and hour buckets
are right and idempotent, long reads use them, expired telemetry goes, unrolled rows stay."""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from timeline import rollups, samples
from timeline import tables as t
from timeline.models import Sample, SampleRow
from timeline.samples_sql import SqlSampleStore

HOUR = 3600.0
START = (time.time() // HOUR - 10) * HOUR  # an hour boundary, 10 hours ago


def _store(factory: sessionmaker[Session], rows: Sequence[Sample]) -> None:
    with factory() as s:
        samples.store().append(s, node="n1", samples=[SampleRow.of(r) for r in rows])
        s.commit()


def _minutes(session: Session) -> list[dict[str, object]]:
    stmt = select(t.samples_1m).order_by(t.samples_1m.c.bucket_ms, t.samples_1m.c.gpu_id)
    return [dict(r) for r in session.execute(stmt).mappings()]


def test_minute_rollup_has_min_max_mean_last_and_rerunning_never_double_counts(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _store(session_factory, [
        Sample(ts=START + 0, gpu_uuid="GPU-a", util_gpu=10.0, power_w=100.0),
        Sample(ts=START + 20, gpu_uuid="GPU-a", util_gpu=30.0),
        Sample(ts=START + 40, gpu_uuid="GPU-a", util_gpu=20.0, power_w=300.0),
        Sample(ts=START + 70, gpu_uuid="GPU-a", util_gpu=90.0),
    ])  # fmt: skip
    now = START + 5 * 60
    rollups.run_rollups(session_factory, now=now)
    first = _minutes(session)
    rollups.run_rollups(session_factory, now=now)  # the same window again
    again = _minutes(session)
    assert again == first and len(first) == 2
    m = first[0]
    assert (m["count"], m["util_gpu_min"], m["util_gpu_max"], m["util_gpu_n"]) == (3, 10.0, 30.0, 3)
    assert m["util_gpu_mean"] == 20.0 and m["util_gpu_last"] == 20.0
    assert (m["power_w_min"], m["power_w_max"], m["power_w_n"], m["power_w_mean"]) == (
        100.0, 300.0, 2, 200.0,
    )  # fmt: skip
    assert first[1]["util_gpu_last"] == 90.0


def test_a_late_sample_inside_the_overlap_is_counted_on_the_next_run(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _store(session_factory, [Sample(ts=START + 10, gpu_uuid="GPU-a", util_gpu=10.0)])
    rollups.run_rollups(session_factory, now=START + 3 * 60)
    _store(session_factory, [Sample(ts=START + 30, gpu_uuid="GPU-a", util_gpu=50.0)])  # late
    rollups.run_rollups(session_factory, now=START + 4 * 60)
    (m,) = _minutes(session)
    assert (m["count"], m["util_gpu_mean"], m["util_gpu_last"]) == (2, 30.0, 50.0)


def _hours_of_samples(factory: sessionmaker[Session], hours: int) -> None:
    rows = [
        Sample(ts=START + k * 60.0, gpu_uuid="GPU-a", util_gpu=float(k % 100), power_w=200.0)
        for k in range(hours * 60)
    ]
    _store(factory, rows)


def test_hour_rollup_merges_minutes_weighting_means_by_count(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _hours_of_samples(session_factory, 2)
    rollups.run_rollups(session_factory, now=START + 3 * HOUR)
    rollups.run_rollups(session_factory, now=START + 3 * HOUR)  # hours follow the minutes
    hours = session.execute(select(t.samples_1h).order_by(t.samples_1h.c.bucket_ms)).mappings()
    got = [(h["count"], h["util_gpu_n"], h["util_gpu_min"], h["util_gpu_max"]) for h in hours]
    assert got == [(60, 60, 0.0, 59.0), (60, 60, 0.0, 99.0)]
    mean = session.execute(select(t.samples_1h.c.util_gpu_mean)).scalars().first()
    expected = sum(k % 100 for k in range(60)) / 60
    assert mean is not None and abs(mean - expected) < 1e-3


def test_long_reads_use_the_rollups_and_agree_with_raw_rows(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _hours_of_samples(session_factory, 8)
    raw_store = SqlSampleStore(rollup_after_s=1e9, hourly_after_s=1e9)
    rolled_store = SqlSampleStore(rollup_after_s=HOUR, hourly_after_s=1e9)
    since, until = START, START + 8 * HOUR
    raw = raw_store.series(session, uuids=["GPU-a"], since=since, until=until, bucket_s=1800,
                           fields=["util_gpu"])  # fmt: skip
    raw_window = raw_store.window_stats(session, uuids=["GPU-a"], since=since, until=until,
                                        fields=["util_gpu", "power_w"])  # fmt: skip
    rollups.run_rollups(session_factory, now=until + 10 * HOUR)
    rollups.run_rollups(session_factory, now=until + 10 * HOUR)  # a second span of 6 hours
    session.execute(text("DELETE FROM samples WHERE ts_ms < :cut"), {"cut": (until - HOUR) * 1000})
    session.commit()  # only the rollups still hold the first seven hours
    rolled = rolled_store.series(session, uuids=["GPU-a"], since=since, until=until, bucket_s=1800,
                                 fields=["util_gpu"])  # fmt: skip
    assert [p["ts"] for p in rolled["GPU-a"]] == [p["ts"] for p in raw["GPU-a"]]
    for a, b in zip(raw["GPU-a"], rolled["GPU-a"], strict=True):
        assert abs((a["util_gpu"] or 0) - (b["util_gpu"] or 0)) < 1e-3
    window = rolled_store.window_stats(session, uuids=["GPU-a"], since=since, until=until,
                                       fields=["util_gpu", "power_w"])  # fmt: skip
    assert window["GPU-a"].count == raw_window["GPU-a"].count == 8 * 60
    assert window["GPU-a"].fields["power_w"].count == 8 * 60
    assert window["GPU-a"].fields["util_gpu"].max == raw_window["GPU-a"].fields["util_gpu"].max
    busy = rolled_store.last_above(session, uuids=["GPU-a"], field="util_gpu", threshold=98.0,
                                   since=since, until=until)  # fmt: skip
    assert busy["GPU-a"] > since


def test_whole_minute_buckets_read_the_minute_rollups_at_any_span(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    _hours_of_samples(session_factory, 1)  # one sample a minute, util 0..59
    store = SqlSampleStore(rollup_after_s=HOUR, hourly_after_s=1e9)
    since, until = START, START + HOUR  # not longer than rollup_after_s: raw unless minutes
    raw_heat = store.node_utilization(session, since=since, until=until, bucket_s=120)
    raw_series = store.series(session, uuids=["GPU-a"], since=since, until=until, bucket_s=120,
                              fields=["util_gpu"])  # fmt: skip
    rollups.run_rollups(session_factory, now=until + 10 * 60)
    session.execute(text("DELETE FROM samples WHERE ts_ms < :cut"), {"cut": (until - 600) * 1000})
    session.commit()  # only the rollups still hold the first 50 minutes
    heat = store.node_utilization(session, since=since, until=until, bucket_s=120)
    assert len(heat) == len(raw_heat) == 30
    for (node, ts, util), (rnode, rts, rutil) in zip(sorted(heat), sorted(raw_heat), strict=True):
        assert (node, ts) == (rnode, rts) and abs(util - rutil) < 1e-3
    assert sorted(heat)[0][2] == 0.5 and sorted(heat)[-1][2] == 58.5  # means of (0,1), (58,59)
    series = store.series(session, uuids=["GPU-a"], since=since, until=until, bucket_s=120,
                          fields=["util_gpu"])  # fmt: skip
    got = [(p["ts"], p["util_gpu"]) for p in series["GPU-a"]]
    assert got == [(p["ts"], p["util_gpu"]) for p in raw_series["GPU-a"]]
    # 90-second buckets are not whole minutes: a short span still reads raw rows only, and
    # the deleted minutes show as missing (not read from the rollups).
    part = store.node_utilization(session, since=since, until=until, bucket_s=90)
    assert min(ts for _, ts, _ in part) >= until - 600 - 90


def test_retention_deletes_expired_rows_but_never_rows_not_rolled_up(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    old = time.time() - 9 * 86400
    recent = time.time() - 300
    _store(session_factory, [Sample(ts=old, gpu_uuid="GPU-a", util_gpu=1.0),
                             Sample(ts=recent, gpu_uuid="GPU-a", util_gpu=2.0)])  # fmt: skip
    keep = rollups.Retention(raw_days=7.0)
    rollups.run_retention(session_factory, keep=keep)
    count = select(func.count()).select_from(t.samples)
    assert session.execute(count).scalar_one() == 2  # nothing rolled up yet: nothing deleted
    rollups.run_rollups(session_factory)  # the old row's six hours
    rollups.run_rollups(session_factory)  # then on over the gap to the newest row
    assert session.execute(select(func.count()).select_from(t.samples_1m)).scalar_one() == 2
    session.rollback()  # a reader's lock would hold up dropping a partition on PostgreSQL
    rollups.run_retention(session_factory, keep=keep)
    session.rollback()
    assert session.execute(count).scalar_one() == 1  # the 9-day-old row went
    assert rollups.run_retention(session_factory, keep=keep).get("raw", 0) == 0


def test_table_bytes_reports_a_size_for_every_sample_table(session: Session) -> None:
    sizes = rollups.table_bytes(session)
    for name in ("samples", "samples_1m", "samples_1h", "gpu_ids", "gpu_latest"):
        assert sizes[name] > 0, name


def test_a_day_partition_made_later_takes_its_rows_over_from_the_default_one(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    from timeline import partitions

    far = time.time() + 40 * 86400  # beyond the partitions made ahead: lands in DEFAULT
    with session_factory() as s:
        samples.store().append(
            s, node="n1", samples=[SampleRow(ts=far, gpu_uuid="GPU-f", util_gpu=1.0)]
        )
        s.commit()
    made = partitions.ensure_partitions(session, now=far, ahead_days=0)
    session.commit()
    if session.get_bind().dialect.name != "postgresql":
        assert made == []  # SQLite has no partitions: retention deletes rows
        return
    day = int(far // 86400)
    assert made == [partitions.partition_name(day)]
    moved = session.execute(text(f"SELECT count(*) FROM {made[0]}")).scalar_one()
    left = session.execute(text("SELECT count(*) FROM samples_default")).scalar_one()
    assert (moved, left) == (1, 0)
    dropped = partitions.drop_expired(session, before_ms=(day + 1) * 86_400_000)
    session.commit()
    assert made[0] in dropped
    assert session.execute(select(func.count()).select_from(t.samples)).scalar_one() == 0


def test_a_ten_minute_window_reads_the_minute_rollups_and_answers_exactly_as_raw_rows(
    session_factory: sessionmaker[Session], session: Session
) -> None:
    rows = [
        Sample(
            ts=START + k * 10.0 + 0.25,
            gpu_uuid="GPU-a",
            util_gpu=float((k * 37) % 101),
            power_w=None if k % 7 == 0 else 100.0 + (k * 13) % 500,
        )
        for k in range(6 * 60)  # an hour, every 10 s
    ]
    _store(session_factory, rows)
    store = SqlSampleStore()  # the defaults: rollups for ranges over an hour, windows over 10 min
    since, until = START + 125.5, START + 33 * 60 + 7.3  # the idle check's span, off the minute
    fields = ["util_gpu", "power_w"]
    raw = store.window_stats(session, uuids=["GPU-a"], since=since, until=until, fields=fields)
    rollups.run_rollups(session_factory, now=START + HOUR + 600)
    cut = {"lo": (START + 180) * 1000, "hi": (START + 33 * 60) * 1000}
    session.execute(text("DELETE FROM samples WHERE ts_ms >= :lo AND ts_ms < :hi"), cut)
    session.execute(text("DELETE FROM samples_staged WHERE ts_ms >= :lo AND ts_ms < :hi"), cut)
    session.commit()  # whole minutes inside the window are now only in the rollups
    rolled = store.window_stats(session, uuids=["GPU-a"], since=since, until=until, fields=fields)
    assert rolled == raw and raw["GPU-a"].count == 186
