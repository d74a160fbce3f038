"""The backtest on the correlator benchmark's fleet: a day of jobs, Xid 79s under multi-node
jobs, NCCL hangs, users' own faults and OOMs, correlated by the real correlator, then replayed
through policies. Nothing is written and no scheduler is called."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from sqlalchemy.orm import Session, sessionmaker

from benchmarks._correlate_fleet import add_events, build_day
from benchmarks.correlate import _catch_up, _load
from correlator import service as incidents
from healer.backtest import backtest
from healer.policy import Policy
from timeline.settings import Settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory: pytest.TempPathFactory) -> sessionmaker[Session]:
    """A 32-node day of the correlator benchmark, correlated (SQLite; read-only afterwards)."""
    from timeline import db

    url = f"sqlite:///{tmp_path_factory.mktemp('bt') / 'fleet.db'}"
    db.upgrade(url)
    factory = db.make_sessionmaker(db.make_engine(url))
    wall = time.time()
    day = build_day(nodes=32, start=wall - 86_400.0, end=wall + 3_600.0)
    add_events(day, until=wall - 60.0)
    _load(factory, day)
    _catch_up(factory, Settings(database_url=url))
    return factory


def _incidents(factory: sessionmaker[Session]) -> list:
    with factory() as s:
        return incidents.list_incidents(s, limit=100_000)


def test_default_policy_drains_only_hardware_nodes_and_recovers_their_jobs(
    fleet_db: sessionmaker[Session],
) -> None:
    since = time.time() - 7 * 86400
    with fleet_db() as s:
        out = backtest(s, policy=Policy(), since=since)
    found = _incidents(fleet_db)
    by_cat = Counter(i.category for i in found)
    hardware = [i for i in found if i.category == "gpu_hardware" and i.blame == "node"]
    assert by_cat["gpu_hardware"] > 0 and by_cat["user_code"] > 0 and by_cat["oom_gpu"] > 0
    assert out["incidents"] == len(found)
    assert (
        out["by_rule"]["user-fault"] == by_cat["user_code"] + by_cat["oom_gpu"] + by_cat["oom_host"]
    )
    sure = [i for i in hardware if i.confidence >= 0.8]  # below it: only proposed
    assert out["proposed_only"]["drain"] == len(hardware) - len(sure) > 0  # Xid 63 floods
    # Every drain (done or blocked) is one of a hardware incident's nodes, nothing else.
    assert out["drains"] + out["drains_blocked_by_breaker"] <= len(sure)
    assert set(out["nodes_kept_out"]) <= {i.culprit_node for i in sure}
    assert out["drains"] > 0 and out["breaker_trips"] >= 0
    # Each job a hardware incident hit is recovered (the fleet's budget is never reached).
    hit = sum(len(i.affected_jobs) for i in sure)
    nccl = [i for i in found if i.category == "nccl_timeout_unknown"]
    conf_ok = sum(len(i.affected_jobs) for i in nccl if i.confidence >= 0.45)
    assert out["recoveries"] == hit + conf_ok and out["recoveries_refused_by_budget"] == 0
    assert out["notifications"] == sum(out["by_rule"].values()) - out["by_rule"].get("scheduler", 0)


def test_a_tight_breaker_trips_once_and_blocks_the_rest(fleet_db: sessionmaker[Session]) -> None:
    tight = Policy(breaker_max_nodes=1, breaker_window_s=2 * 86400)
    with fleet_db() as s:
        loose = backtest(
            s, policy=Policy(breaker_max_fraction=1.0, breaker_max_nodes=1000), since=0
        )
        out = backtest(s, policy=tight, since=0)
    assert loose["breaker_trips"] == 0 and loose["drains"] > 1
    assert out["breaker_trips"] == 1 and out["drains"] == 1
    planned = loose["drains"] + loose["drains_already_out"]  # every drain the rules asked for
    assert out["drains"] + out["drains_blocked_by_breaker"] + out["drains_already_out"] == planned
    assert out["drains_blocked_by_breaker"] >= loose["drains"] - 1


def test_gpu_hours_saved_scale_with_how_long_a_person_would_take(
    fleet_db: sessionmaker[Session],
) -> None:
    with fleet_db() as s:
        two = backtest(s, policy=Policy(), since=0, human_response_s=7200, auto_s=60)
        four = backtest(s, policy=Policy(), since=0, human_response_s=14400, auto_s=60)
        none = backtest(s, policy=Policy(), since=0, human_response_s=60, auto_s=60)
    assert two["gpu_hours_saved"] > 0 and none["gpu_hours_saved"] == 0
    assert four["gpu_hours_saved"] == pytest.approx(
        two["gpu_hours_saved"] * (14400 - 60) / (7200 - 60), rel=0.01
    )
