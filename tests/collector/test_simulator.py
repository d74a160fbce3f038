"""The demo fleet produces valid batches that show every GPU state on the fleet grid."""

from __future__ import annotations

import time
from collections import Counter

from sqlalchemy.orm import Session, sessionmaker

from collector.simulator import DemoFleet, load_profiles
from correlator import service as incidents
from correlator.flows import correlate_once
from timeline import fleet, queries, service
from timeline.settings import Settings


def test_profiles_come_from_the_real_h100_trace_phases() -> None:
    profiles = load_profiles()
    assert {"idle", "matmul", "spin_all_sms", "held_idle"} <= set(profiles)
    spin = profiles["spin_all_sms"]
    assert all(r["util"] == 100 for r in spin)
    assert max(r["power_mw"] for r in spin) < 200_000  # a spin-wait draws near idle power


def test_demo_fleet_shows_busy_idle_free_and_failing_gpus(
    session: Session, session_factory: sessionmaker[Session]
) -> None:
    sim = DemoFleet(nodes=8, gpus_per_node=8)
    now = time.time()
    sim.start(now)
    for batch in sim.tick(now, first=True):
        service.append_batch(session, batch=batch)
    session.commit()
    correlate_once(session_factory, settings=Settings(), now=now)  # failing = its incidents
    failing = incidents.failing_set(session)
    views = fleet.fleet_view(session, now=now, failing=failing)
    states = Counter(g.state.value for n in views for g in n.gpus)
    assert sum(states.values()) == 64
    assert states["busy"] and states["idle_allocated"] and states["free"] and states["failing"]
    # The nodes the failing set blames, named by their incidents, are those with red GPUs.
    red = {n.name for n in views if any(g.state.value == "failing" for g in n.gpus)}
    assert incidents.blamed_nodes(session) == red
    kinds = Counter(e["kind"] for e in queries.events_in_window(session))
    assert kinds["xid"] == 2 and kinds["nccl_timeout"] >= 2 and kinds["cuda_error"] == 1
    jobs = {j["state"] for j in queries.list_jobs(session)}
    assert {"RUNNING", "FAILED"} <= jobs


def test_later_ticks_keep_the_fleet_reporting_without_identity_repeats() -> None:
    sim = DemoFleet(nodes=2, gpus_per_node=4)
    now = time.time()
    sim.start(now)
    first = sim.tick(now, first=True)
    later = sim.tick(now + 5)
    assert sum(len(b.gpus) for b in first) == 8 and sum(len(b.gpus) for b in later) == 0
    assert sum(len(b.samples) for b in later) == 8
