"""Collective-hang detection from telemetry: every GPU of a job busy at near-idle power.

A kernel spinning on a flag (what NCCL does while a peer never arrives) keeps utilization at
100% but draws little power: on the real H100 trace (tests/fixtures/telemetry) a spin sits at
~118-137 W against ~71 W idle and ~620-700 W for real matmul work. Thresholds are therefore
relative to each GPU's own observed idle power and its power limit, not absolute watts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from correlator import service
from correlator.holdings import JobRef, held_gpus
from correlator.incidents import IncidentBook, fingerprint
from correlator.models import AffectedJob, Incident, IncidentState
from correlator.sql import among
from timeline import samples
from timeline import tables as t
from timeline.models import EventKind
from timeline.settings import Settings

LEARNED = "hang_profiles_learned_ts"  # correlator state: when every held GPU's profile last grew
LEARN_MAX_S = 540.0  # a profile pass reads at most this far back (SQL: raw rows, under 600 s)

# Board power limits by model name (NVIDIA datasheets), most specific first.
_MODEL_LIMITS_W = (
    ("H100 PCIE", 350.0),
    ("H100 NVL", 400.0),
    ("H100", 700.0),
    ("H200 NVL", 600.0),
    ("H200", 700.0),
    ("GH200", 900.0),
    ("B200", 1000.0),
    ("A100 80GB PCIE", 300.0),
    ("A100-PCIE", 250.0),
    ("A100", 400.0),
    ("L40S", 350.0),
    ("L40", 300.0),
    ("L4", 72.0),
    ("A10G", 300.0),
)


def model_power_limit(name: str | None) -> float | None:
    """The board power limit of a GPU model by its NVML name, when known."""
    upper = (name or "").upper()
    for needle, watts in _MODEL_LIMITS_W:
        if needle in upper:
            return watts
    return None


@dataclass
class Profile:
    """What a GPU draws idle and at most; the spin threshold lies between."""

    idle_w: float | None
    max_w: float | None
    limit_w: float | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Profile:
        """A profile from its stored row (an empty row: nothing learned yet)."""
        return cls(row.get("idle_w"), row.get("max_w"), row.get("limit_w"))

    def spin_ceiling(self, *, fraction: float, default_limit_w: float) -> float | None:
        """Power below which a fully busy GPU is spinning rather than computing."""
        if self.idle_w is None:
            return None
        limit = self.limit_w or max(self.max_w or 0.0, default_limit_w)
        return self.idle_w + fraction * max(limit - self.idle_w, 0.0)


@dataclass
class Window:
    """One GPU's telemetry over the last hang_min_duration_s, aggregated in SQL."""

    first_ts: float
    last_ts: float
    min_util: float | None  # None when any sample lacks utilization
    min_power: float | None
    max_power: float | None  # None when any sample lacks power

    def spinning(
        self, *, ceiling: float, util_min: float, now: float, need_s: float, gap_s: float
    ) -> bool:
        """Every sample of the window busy at spin power, covering the window, and fresh."""
        if self.min_util is None or self.max_power is None:
            return False
        covered = self.first_ts <= now - need_s + gap_s and now - self.last_ts <= gap_s
        return covered and self.min_util >= util_min and self.max_power <= ceiling


def _job_gpus(session: Session, now: float) -> tuple[dict[str, set[str]], dict[str, JobRef]]:
    """GPU uuids per running job (whole-node allocations count every GPU of the node)."""
    gpus: dict[str, set[str]] = defaultdict(set)
    jobs: dict[str, JobRef] = {}
    for job, gpu, _ in held_gpus(session, at=now):
        jobs.setdefault(job.job_id, job)
        gpus[job.job_id].add(gpu.uuid)
    return gpus, jobs


@dataclass
class PowerBook:
    """Power profiles as stored, and as widened during one pass; written once, at its end, so
    that a pass holds no write lock while it reads telemetry (SQLite's lock is the whole
    database: held through a 100k-GPU read, it starved the leader lease until it lapsed)."""

    stored: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)

    def read(self, session: Session, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """uuid -> profile, as widened in this pass or else as stored."""
        wanted = list(uuids)
        missing = [u for u in wanted if u not in self.stored]
        got = service.power_profiles(session, gpu_uuids=missing)
        self.stored.update({u: got.get(u) for u in missing})
        return {u: p for u in wanted if (p := self.rows.get(u) or self.stored[u]) is not None}

    def save(self, session: Session, *, now: float) -> None:
        """Write the profiles this pass widened."""
        stored = {u: p for u, p in self.stored.items() if p is not None}
        service.save_power_profiles(session, profiles=self.rows.values(), stored=stored, now=now)


def _profiles(
    session: Session, seen: Mapping[str, tuple[float | None, float | None]], *, power: PowerBook
) -> dict[str, Profile]:
    """Learned power profiles, widened by the (lowest, highest) power `seen` of each GPU
    (saved at the pass's end)."""
    stored = power.read(session, seen)
    # A GPU's model (its power limit) is looked up only until its profile holds a limit.
    unnamed = [u for u in seen if not stored.get(u, {}).get("limit_w")]
    names: dict[str, str | None] = {}
    if unnamed:
        stmt = select(t.gpus.c.uuid, t.gpus.c.name).where(among(session, t.gpus.c.uuid, unnamed))
        names = {r[0]: r[1] for r in session.execute(stmt).all()}
    out = {}
    for uuid, (low, high) in seen.items():
        old = stored.get(uuid, {})
        idle = min((v for v in (low, old.get("idle_w")) if v is not None), default=None)
        peak = max((v for v in (high, old.get("max_w")) if v is not None), default=None)
        limit = old.get("limit_w") or model_power_limit(names.get(uuid))
        out[uuid] = Profile(idle, peak, limit)
        power.rows[uuid] = {"gpu_uuid": uuid, "idle_w": idle, "max_w": peak, "limit_w": limit}
    return out


def _windows(session: Session, uuids: set[str], since: float, until: float) -> dict[str, Window]:
    """Per GPU: first/last sample time, lowest utilization, lowest and highest power in the
    window."""
    if not uuids:
        return {}
    fields = ["util_gpu", "power_w"]
    stats = samples.store().window_stats(
        session, uuids=sorted(uuids), since=since, until=until, fields=fields
    )
    out = {}
    for uuid, w in stats.items():
        busy, power = w.fields.get("util_gpu"), w.fields["power_w"]
        full_power = power.count == w.count
        out[uuid] = Window(
            w.first_ts,
            w.last_ts,
            busy.min if busy is not None and busy.count == w.count else None,
            power.min,
            power.max if full_power else None,
        )
    return out


def _corroboration(session: Session, job_id: str, start: float, end: float) -> list[str]:
    """Other signs of a hang: W&B saw no step, or the job's log went silent when the spin began."""
    e = t.events
    found = []
    stalls = select(func.count()).where(
        e.c.job_id == job_id,
        e.c.kind == EventKind.PROGRESS_STALLED.value,
        e.c.ts >= start - 600.0,
        e.c.ts <= end,
    )
    if session.execute(stalls).scalar_one():
        found.append("W&B step stall")
    logs = select(func.count()).where(e.c.job_id == job_id, e.c.source == "joblog")
    before = session.execute(logs.where(e.c.ts >= start - 600.0, e.c.ts < start)).scalar_one()
    during = session.execute(logs.where(e.c.ts >= start, e.c.ts <= end)).scalar_one()
    if before and not during:
        found.append("job log silent since the spin began")
    return found


def _ceiling(profile: Profile, settings: Settings) -> float | None:
    """The spin ceiling of a profile under the settings' fraction and default power limit."""
    return profile.spin_ceiling(
        fraction=settings.hang_power_fraction, default_limit_w=settings.hang_default_power_limit_w
    )


def _learn(
    session: Session, uuids: set[str], *, settings: Settings, now: float, power: PowerBook
) -> bool:
    """Every hang_profile_interval_s, widen every held GPU's power profile by its samples
    since the last time (at most LEARN_MAX_S back); whether it did."""
    last = service.get_state(session, name=LEARNED)
    since_last = None if last is None else now - float(last)
    if since_last is not None and 0.0 <= since_last < settings.hang_profile_interval_s:
        return False
    # First pass, or a clock that went back: the hang window only.
    span = min(max(since_last or 0.0, settings.hang_min_duration_s), LEARN_MAX_S)
    seen = samples.store().field_range(
        session, uuids=sorted(uuids), since=now - span, until=now, field="power_w"
    )
    _profiles(session, seen, power=power)
    return True


def _newest_verdicts(
    session: Session, uuids: set[str], *, settings: Settings, now: float, power: PowerBook
) -> tuple[set[str], set[str]]:
    """(GPUs that may be spinning, GPUs that cannot be) judged by their newest sample in the
    hang window alone: it must be fresh, busy and at or under the spin ceiling of the GPU's
    stored profile (a GPU without one may be spinning).

    A spin window's samples are all busy and under the ceiling, the newest too, and widening a
    profile by the window only lowers its ceiling: so a GPU that cannot be spinning by its
    newest sample is not spinning by its window. Reading the newest samples of 100k GPUs costs
    a fraction of reading their windows (bench scale, VictoriaMetrics: 8.5 s a pass).
    """
    need, gap = settings.hang_min_duration_s, settings.hang_max_sample_gap_s
    fields = ["util_gpu", "power_w"]
    rows = samples.store().newest(
        session, uuids=sorted(uuids), since=now - need, until=now, fields=fields
    )
    maybe = {u for u, r in rows.items() if r["ts"] > now}  # the store knows only a newer row
    busy = {
        u: r["power_w"]
        for u, r in rows.items()
        if now - gap <= r["ts"] <= now
        and samples.within(r["util_gpu"], settings.hang_util_min, None)
        and r["power_w"] is not None
    }
    stored = power.read(session, busy)
    for uuid, watts in busy.items():
        ceiling = _ceiling(Profile.of(stored.get(uuid, {})), settings)
        if ceiling is None or watts <= ceiling:
            maybe.add(uuid)
    return maybe, set(rows) - maybe


def _suspects(
    session: Session, uuids: set[str], *, settings: Settings, now: float, power: PowerBook
) -> set[str]:
    """A superset of the GPUs `_newest_verdicts` may find spinning, asked of the store with
    the highest spin ceiling among the GPUs' profiles as the power bound: VictoriaMetrics
    answers with the few GPUs that match rather than every GPU's newest values, which were
    most of a hang check's reads at 100k GPUs (bench scale)."""
    if not uuids:
        return set()
    ceilings = {u: _ceiling(Profile.of(p), settings) for u, p in power.read(session, uuids).items()}
    # A GPU without a ceiling (no profile yet) may spin at any power.
    open_ = sorted(u for u in uuids if ceilings.get(u) is None)
    cap = max((c for c in ceilings.values() if c is not None), default=None)
    found: set[str] = set()
    args = {"since": now - settings.hang_min_duration_s, "until": now}
    busy = (settings.hang_util_min, None)
    if open_:
        found |= samples.store().newest_within(
            session, uuids=open_, bounds={"util_gpu": busy, "power_w": (None, None)}, **args
        )
    if cap is not None:
        capped = sorted(uuids.difference(open_))
        found |= samples.store().newest_within(
            session, uuids=capped, bounds={"util_gpu": busy, "power_w": (None, cap)}, **args
        )
    return found


def check_windows(
    session: Session,
    gpus: dict[str, set[str]],
    *,
    settings: Settings,
    now: float,
    power: PowerBook | None = None,
) -> tuple[dict[str, set[str]], dict[str, Window]]:
    """What one hang check reads: the jobs (of `gpus`, job id -> GPU uuids) that may be hung,
    every GPU with telemetry possibly spinning, and the windows of those jobs' GPUs."""
    power = PowerBook() if power is None else power
    some = _suspects(session, set().union(*gpus.values()), settings=settings, now=now, power=power)
    gpus = {job_id: held for job_id, held in gpus.items() if held & some}
    maybe, cannot = _newest_verdicts(
        session, set().union(*gpus.values()), settings=settings, now=now, power=power
    )
    gpus = {job_id: held for job_id, held in gpus.items() if held & maybe and not held & cannot}
    need = settings.hang_min_duration_s
    return gpus, _windows(session, set().union(*gpus.values()), now - need, now)


def detect(
    session: Session,
    *,
    book: IncidentBook,
    settings: Settings,
    now: float,
    later: list[Callable[[], None]],
) -> int:
    """Open or refresh "collective hang suspected" incidents; resolve those that cleared.
    Profile writes go into `later`, which the caller runs once every read is done."""
    gpus, jobs = _job_gpus(session, now)
    need, gap = settings.hang_min_duration_s, settings.hang_max_sample_gap_s
    power = PowerBook()
    if _learn(session, set().union(*gpus.values()), settings=settings, now=now, power=power):
        later.append(lambda: service.set_state(session, name=LEARNED, value=now, now=now))
    gpus, windows = check_windows(session, gpus, settings=settings, now=now, power=power)
    ranges = {u: (w.min_power, w.max_power) for u, w in windows.items()}
    profiles = _profiles(session, ranges, power=power)
    later.append(lambda: power.save(session, now=now))
    hanging: dict[str, tuple[float, float, int]] = {}
    for job_id, held in gpus.items():
        seen = [u for u in held if u in windows]
        spinning = 0
        for uuid in seen:
            ceiling = _ceiling(profiles[uuid], settings)
            spinning += ceiling is not None and windows[uuid].spinning(
                ceiling=ceiling, util_min=settings.hang_util_min, now=now, need_s=need, gap_s=gap
            )
        if seen and spinning == len(seen):  # every GPU with telemetry spins
            start = min(windows[u].first_ts for u in seen)
            hanging[job_id] = (start, max(windows[u].last_ts for u in seen), len(seen))
    for job_id, (start, end, n) in hanging.items():
        signs = _corroboration(session, job_id, start, end)
        _flag(book, jobs[job_id], (start, end, n), signs, settings.hang_util_min)
    for inc in list(book.by_fp.values()):
        if inc.details.get("detector") == "hang" and inc.job_id not in hanging:
            inc.state, inc.resolved_ts = IncidentState.RESOLVED, now
            inc.resolution = "the job's GPUs are no longer spinning (or the job ended)"
            book.changed[inc.fingerprint] = inc
            book.by_fp.pop(inc.fingerprint, None)
    return len(hanging)


def _flag(
    book: IncidentBook,
    job: JobRef,
    spin: tuple[float, float, int],
    signs: list[str],
    util_min: float,
) -> None:
    start, end, n = spin
    fp = fingerprint("hang", job.job_id)
    inc = book.by_fp.get(fp)
    if inc is None:
        inc = Incident(
            fingerprint=fp,
            category="nccl_timeout_unknown",
            blame="unknown",
            title=f"collective hang suspected: all {n} GPUs of job {job.job_id} spin at idle power",
            job_id=job.job_id,
            opened_ts=end,
            last_seen_ts=end,
            affected_jobs=[AffectedJob(job_id=job.job_id, scheduler=job.scheduler,
                                       user=job.user, account=job.account)],
            action="dump the job's stacks (py-spy dump) to find the stuck rank; if it does not "
            "recover, cancel and resubmit from the last checkpoint",
            details={"detector": "hang", "priority": 10},
        )  # fmt: skip
        book.by_fp[fp] = inc
        book.opened += 1
    start = min(start, float(inc.details.get("spin_since_ts") or start))  # since first seen
    inc.last_seen_ts = end
    inc.count = max(1, int((end - start) // 10) + 1)
    inc.confidence = min(0.9, 0.6 + (0.2 if "W&B step stall" in signs else 0.0) + 0.1 * (
        "job log silent since the spin began" in signs
    ))  # fmt: skip
    inc.details.update(
        spin_since_ts=start,
        gpus=n,
        corroborated_by=signs,
        evidence=[
            f"{n} GPUs at >= {util_min:.0f}% utilization and near-idle power for "
            f"{end - start:.0f} s" + "".join(f"; {s}" for s in signs)
        ],
    )
    book.changed[fp] = inc
