"""Hang detection on the REAL H100 trace: a spin at 100% utilization and ~135 W on every GPU of
a job is flagged within 60 s; real compute at 100% and ~620 W is not."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from correlator.hang import Profile, Window, model_power_limit
from tests.correlator.correlator_fleet import H100, Fleet, gpu_uuid, load_trace
from timeline import samples
from timeline.models import Event, EventKind, Sample
from timeline.samples_sql import SqlSampleStore
from timeline.settings import Settings

TRACE = load_trace("trace_spin_vs_compute.jsonl")
NODES = ["gpu-node-00", "gpu-node-01"]
GPUS = [0, 1, 2, 3]
T0 = 100_000.0


def _segment(phases: set[str], steady: Any) -> tuple[list[dict], list[dict]]:
    """The real rows of some phases in order, and their steady tail to repeat."""
    rows = [r for r in TRACE if r.get("phase") in phases]
    return rows, [r for r in rows if steady(r)]


IDLE, IDLE_STEADY = _segment({"idle"}, lambda r: r["power_mw"] < 75_000)
SPIN, SPIN_STEADY = _segment({"spin_one_block", "spin_all_sms"}, lambda r: r["util"] == 100)
COMPUTE, COMPUTE_STEADY = _segment({"matmul"}, lambda r: r["power_mw"] > 600_000)


def _play(rows: list[dict], steady: list[dict], start: float, seconds: float) -> list[tuple]:
    """(ts, row): the real rows at their real 10 Hz spacing, then the steady part repeated."""
    out, ts, i = [], start, 0
    seq = rows + steady * 1000
    while ts < start + seconds:
        out.append((ts, seq[i]))
        ts, i = ts + 0.1, i + 1
    return out


def _feed(
    fleet: Fleet, played: list[tuple], since: float, until: float, nodes: list[str] = NODES
) -> None:
    """Every GPU of the job reports the played rows with ts in [since, until)."""
    for node in nodes:
        batch = [
            Sample(
                ts=ts,
                gpu_uuid=gpu_uuid(node, g),
                util_gpu=float(r["util"]),
                util_mem=float(r["mem_util"]),
                power_w=r["power_mw"] / 1000.0,
                sm_clock_mhz=float(r["sm_clock"]),
                temp_gpu=float(r["temp"]),
            )
            for ts, r in played
            if since <= ts < until
            for g in GPUS
        ]
        if batch:
            fleet.samples(node, batch)


def _fleet(session_factory: sessionmaker[Session], **settings: Any) -> Fleet:
    fleet = Fleet(session_factory, Settings(database_url="sqlite://", **settings))
    fleet.nodes(NODES, gpus=4)
    fleet.job("hang-1", NODES, start=T0 - 3600.0, gpus=GPUS, user="frank")
    return fleet


def _timeline() -> tuple[list[tuple], float, float]:
    idle = _play(IDLE, IDLE_STEADY, T0, 20.0)
    compute = _play(COMPUTE, COMPUTE_STEADY, T0 + 20.0, 180.0)
    spin_start = T0 + 200.0
    spin = _play(SPIN, SPIN_STEADY, spin_start, 180.0)
    first_spin = next(ts for ts, r in spin if r["util"] >= 90)
    return idle + compute + spin, spin_start, first_spin


def _run(fleet: Fleet, played: list[tuple], start: float, end: float) -> list[tuple]:
    """Correlate every 10 s while telemetry arrives; (now, hangs flagged) per pass."""
    out, now, fed = [], start, start - 1000.0
    while now <= end:
        _feed(fleet, played, fed, now)
        fed = now
        out.append((now, fleet.correlate(now=now).hangs_flagged))
        now += 10.0
    return out


def test_real_spin_is_flagged_within_60s_and_real_compute_is_not(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    played, spin_start, first_spin = _timeline()
    passes = _run(fleet, played, T0 + 10.0, spin_start + 120.0)
    before = [flag for now, flag in passes if now <= spin_start]
    assert before and not any(before), "real matmul at ~620 W must not look like a hang"
    flagged_at = next(now for now, flag in passes if flag)
    assert flagged_at - first_spin <= 60.0
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.category, inc.blame, inc.job_id) == ("nccl_timeout_unknown", "unknown", "hang-1")
    assert inc.title.startswith("collective hang suspected")
    assert inc.details["gpus"] == len(NODES) * len(GPUS)
    assert inc.explanation.startswith("Job hang-1 (user frank): collective hang suspected")


def test_compute_alone_for_five_minutes_is_never_flagged(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    played = _play(IDLE, IDLE_STEADY, T0, 20.0) + _play(COMPUTE, COMPUTE_STEADY, T0 + 20, 300.0)
    passes = _run(fleet, played, T0 + 10.0, T0 + 320.0)
    assert len(passes) > 25 and not any(flag for _, flag in passes)
    with session_factory() as s:
        assert incidents.list_incidents(s) == []


def test_hang_resolves_when_the_gpus_compute_again(session_factory: sessionmaker[Session]) -> None:
    fleet = _fleet(session_factory)
    played, spin_start, _ = _timeline()
    _run(fleet, played, T0 + 10.0, spin_start + 90.0)
    later = _play(COMPUTE, COMPUTE_STEADY, spin_start + 180.0, 60.0)
    _feed(fleet, later, spin_start + 180.0, spin_start + 240.0)
    fleet.correlate(now=spin_start + 240.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert inc.state == "resolved" and "no longer spinning" in (inc.resolution or "")


def test_wandb_step_stall_raises_confidence(session_factory: sessionmaker[Session]) -> None:
    fleet = _fleet(session_factory)
    played, spin_start, _ = _timeline()
    fleet.events(
        Event(ts=spin_start + 30.0, source="wandb", kind=EventKind.PROGRESS_STALLED,
              job_id="hang-1", message="no step logged for 10 min", payload={"last_step": 5120})
    )  # fmt: skip
    _run(fleet, played, spin_start + 10.0, spin_start + 80.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert inc.confidence == 0.8 and inc.details["corroborated_by"] == ["W&B step stall"]
    assert "W&B step stall" in inc.explanation


def test_job_log_going_silent_when_the_spin_begins_raises_confidence(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    played, spin_start, _ = _timeline()
    fleet.events(
        Event(ts=spin_start - 60.0, node=NODES[0], source="joblog", kind=EventKind.OTHER,
              job_id="hang-1", raw="{'loss': 2.1934, 'grad_norm': 0.83, 'epoch': 0.42}")
    )  # fmt: skip
    _run(fleet, played, spin_start + 10.0, spin_start + 80.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert inc.details["corroborated_by"] == ["job log silent since the spin began"]
    assert inc.confidence == 0.7


def test_spin_threshold_sits_between_real_spin_and_real_compute_power() -> None:
    idle_w = min(r["power_mw"] for r in TRACE) / 1000.0
    ceiling = Profile(idle_w, None, model_power_limit(H100)).spin_ceiling(
        fraction=0.25, default_limit_w=700.0
    )
    assert ceiling is not None
    assert max(r["power_mw"] for r in SPIN_STEADY) / 1000.0 < ceiling
    assert min(r["power_mw"] for r in COMPUTE_STEADY) / 1000.0 > ceiling
    spin_w = [r["power_mw"] / 1000.0 for r in SPIN_STEADY]
    window = Window(T0, T0 + 45.0, 100.0, min(spin_w), max(spin_w))
    assert window.spinning(ceiling=ceiling, util_min=90.0, now=T0 + 45.0, need_s=45.0, gap_s=30.0)
    computing = Window(T0, T0 + 45.0, 100.0, 600.0, 628.0)
    assert not computing.spinning(
        ceiling=ceiling, util_min=90.0, now=T0 + 45.0, need_s=45.0, gap_s=30.0
    )


def test_a_learned_power_profile_is_written_only_when_it_changes(session: Session) -> None:
    rows = [{"gpu_uuid": "GPU-a", "idle_w": 70.0, "max_w": 600.0, "limit_w": 700.0}]
    incidents.save_power_profiles(session, profiles=rows, stored={}, now=100.0)
    stored = incidents.power_profiles(session, gpu_uuids=["GPU-a"])
    incidents.save_power_profiles(session, profiles=rows, stored=stored, now=200.0)
    assert incidents.power_profiles(session, gpu_uuids=["GPU-a"])["GPU-a"]["updated_ts"] == 100.0
    wider = [rows[0] | {"max_w": 650.0}]
    incidents.save_power_profiles(session, profiles=wider, stored=stored, now=300.0)
    got = incidents.power_profiles(session, gpu_uuids=["GPU-a"])["GPU-a"]
    assert (got["max_w"], got["idle_w"], got["updated_ts"]) == (650.0, 70.0, 300.0)


class _WindowSpy(SqlSampleStore):
    """The SQL store, noting which GPUs each short (hang-sized) window read asked for, and
    which each read of newest power did, apart from the filtered ones."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[set[str]] = []
        self.newest_reads: list[set[str]] = []
        self.filtered: list[set[str]] = []

    def window_stats(self, session: Session, **kw: Any) -> Any:
        if kw["until"] - kw["since"] <= 45.0:
            self.reads.append(set(kw["uuids"]))
        return super().window_stats(session, **kw)

    def newest_within(self, session: Session, **kw: Any) -> Any:
        self.filtered.append(set(kw["uuids"]))
        self.inside = True  # the SQL store filters its own newest rows
        try:
            return super().newest_within(session, **kw)
        finally:
            self.inside = False

    def newest(self, session: Session, **kw: Any) -> Any:
        if not getattr(self, "inside", False) and "power_w" in kw["fields"]:  # the hang check's
            self.newest_reads.append(set(kw["uuids"]))
        return super().newest(session, **kw)


def test_only_jobs_with_a_gpu_that_may_spin_have_their_windows_read(
    session_factory: sessionmaker[Session],
) -> None:
    # Profiles learn on the first pass only here, so every later window read is a hang check's.
    fleet = _fleet(session_factory, hang_profile_interval_s=1e9)
    others, mixed = ["gpu-node-02", "gpu-node-03"], ["gpu-node-04", "gpu-node-05"]
    fleet.nodes(others + mixed, gpus=4)
    fleet.job("busy-2", others, start=T0 - 3600.0, gpus=GPUS, user="grace")
    # Half its GPUs spin, half compute: not hung, and its windows need no read either.
    fleet.job("mixed-3", mixed, start=T0 - 3600.0, gpus=GPUS, user="heidi")
    played, spin_start, first_spin = _timeline()
    computing = _play(IDLE, IDLE_STEADY, T0, 20.0) + _play(COMPUTE, COMPUTE_STEADY, T0 + 20, 400.0)
    spy = _WindowSpy()
    old = samples.use(spy)
    try:
        flagged, now = [], T0 + 10.0
        while now <= spin_start + 120.0:
            since = now - 10.0 if now > T0 + 10.0 else T0 - 1.0
            _feed(fleet, computing, since, now, [*others, mixed[1]])
            _feed(fleet, played, since, now, [*NODES, mixed[0]])
            flagged.append((now, fleet.correlate(now=now).hangs_flagged))
            now += 10.0
    finally:
        samples.use(old)
    assert next(t for t, n in flagged if n) - first_spin <= 60.0
    hang_gpus = {gpu_uuid(n, g) for n in NODES for g in GPUS}
    learn, *checks = spy.reads
    assert learn == {gpu_uuid(n, g) for n in NODES + others + mixed for g in GPUS}
    assert checks and all(read == hang_gpus for read in checks)  # neither busy-2 nor mixed-3
    # Each check asks the store to filter every held GPU, then reads the newest values of the
    # jobs that may spin only: busy-2 computes on every GPU and is never read.
    busy_gpus = {gpu_uuid(n, g) for n in others for g in GPUS}
    assert spy.filtered and all(busy_gpus <= read for read in spy.filtered)
    assert spy.newest_reads and not any(busy_gpus & read for read in spy.newest_reads)
    assert any(hang_gpus <= read for read in spy.newest_reads)
    with session_factory() as s:
        assert [i.job_id for i in incidents.list_incidents(s)] == ["hang-1"]


def test_every_held_gpus_power_profile_learns_each_profile_interval(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory, hang_profile_interval_s=60.0)
    played = _play(IDLE, IDLE_STEADY, T0, 20.0) + _play(COMPUTE, COMPUTE_STEADY, T0 + 20, 120.0)
    uuid = gpu_uuid(NODES[0], 0)
    peaks, fed = [], T0 - 1.0
    for now in (T0 + 10.0, T0 + 50.0, T0 + 80.0):
        _feed(fleet, played, fed, now)
        fed = now
        fleet.correlate(now=now)
        with session_factory() as s:
            peaks.append(incidents.power_profiles(s, gpu_uuids=[uuid])[uuid]["max_w"])
    # Computing at ~620 W, the GPU is no spin candidate: its profile grows at the next profile
    # pass (60 s after the first), from every sample since, not at the 10 s hang checks.
    assert peaks[0] < 200.0 and peaks[1] == peaks[0] and peaks[2] > 600.0
