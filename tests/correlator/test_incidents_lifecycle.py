"""Incidents: a flood is one incident with a count; incidents end when their condition clears
and come back as a new occurrence, never sticky."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from correlator.incidents import fingerprint
from tests.correlator.correlator_fleet import XID79, Fleet, gpu_uuid
from timeline.models import Event, EventKind, Sample, Severity


def _xid(ts: float, count: int = 1, node: str = "n1", code: int = 79) -> Event:
    return Event(
        ts=ts, node=node, source="kmsg", kind=EventKind.XID, code=code, pci_bus_id="0000:44:00",
        severity=Severity.CRITICAL, raw=XID79, count=count,
    )  # fmt: skip


def _fleet(session_factory: sessionmaker[Session], **settings: float) -> Fleet:
    fleet = Fleet(session_factory)
    fleet.settings = fleet.settings.model_copy(update=settings)
    fleet.nodes(["n1"])
    fleet.job("j1", ["n1"], start=100.0, user="erin")
    return fleet


def test_fingerprint_is_deterministic_and_distinguishes_parts() -> None:
    assert fingerprint("machine", "gpu_hardware", "n1", "GPU-1") == fingerprint(
        "machine", "gpu_hardware", "n1", "GPU-1"
    )
    assert fingerprint("machine", "gpu_hardware", "n1", "GPU-1") != fingerprint(
        "machine", "gpu_hardware", "n1", "GPU-2"
    )
    assert fingerprint("a", None) != fingerprint("a", "None ")


def test_800k_identical_xid_lines_collapsed_by_the_source_are_one_incident_with_the_count(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(_xid(1000.0, count=800_000))
    fleet.correlate(now=1001.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert inc.count == 800_000 and inc.evidence_event_ids == [inc.root_cause_event_id]


def test_thousands_of_separate_identical_events_are_one_incident_with_bounded_evidence(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory, correlator_max_events=1000, correlator_evidence_cap=20)
    for chunk in range(6):
        fleet.events(*[_xid(1000.0 + chunk + i / 1000) for i in range(1000)])
    reports = [fleet.correlate(now=1010.0) for _ in range(7)]
    assert [r.events_read for r in reports] == [1000] * 6 + [0]  # read in bounded chunks
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert inc.count == 6000
    assert len(inc.evidence_event_ids) == 20
    assert "seen 6000 times" in inc.explanation


def test_incident_resolves_when_the_node_is_healthy_and_quiet_and_reopens_as_new_occurrence(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory, correlator_quiet_s=600.0)
    fleet.events(_xid(1000.0))
    fleet.correlate(now=1001.0)
    fleet.correlate(now=1500.0)  # not quiet long enough yet
    with session_factory() as s:
        assert [i.state for i in incidents.list_incidents(s)] == ["open"]
    fleet.correlate(now=1700.0)
    with session_factory() as s:
        (first,) = incidents.list_incidents(s)
    assert first.state == "resolved" and first.resolved_ts == 1700.0
    assert "healthy" in (first.resolution or "")
    fleet.events(_xid(2000.0))
    fleet.correlate(now=2001.0)
    with session_factory() as s:
        rows = incidents.list_incidents(s)
    assert [(i.occurrence, i.state) for i in rows] == [(2, "open"), (1, "resolved")]
    assert rows[0].fingerprint == rows[1].fingerprint


def test_incident_on_a_drained_node_stays_open_until_the_node_is_back(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory, correlator_quiet_s=600.0)
    fleet.events(_xid(1000.0))
    fleet.node_state("n1", "DRAINED")
    fleet.correlate(now=1001.0)
    fleet.correlate(now=5000.0)
    with session_factory() as s:
        assert incidents.list_incidents(s)[0].state == "open"
    fleet.node_state("n1", "IDLE")
    fleet.correlate(now=5010.0)  # clearing is checked every correlator_resolve_s (5 s)
    with session_factory() as s:
        assert incidents.list_incidents(s)[0].state == "resolved"


def test_incident_resolves_when_its_gpu_is_busy_again(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(_xid(1000.0))
    fleet.correlate(now=1001.0)
    busy = [Sample(ts=1100.0 + i, gpu_uuid=gpu_uuid("n1", 2), util_gpu=99.0) for i in range(5)]
    fleet.samples("n1", busy)
    fleet.correlate(now=1110.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert (inc.state, inc.resolution) == ("resolved", "the GPU is busy again")


def test_job_scoped_incident_resolves_when_the_job_runs_again(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    oom = Event(
        ts=1000.0, node="n1", source="joblog", kind=EventKind.CUDA_OOM, job_id="j1",
        severity=Severity.ERROR,
        raw="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has "
        "a total capacity of 79.11 GiB of which 6.19 MiB is free.",
    )  # fmt: skip
    fleet.events(oom)
    fleet.correlate(now=1001.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.category, inc.job_id) == ("oom_gpu", "j1")
    fleet.job("j1-requeue", ["n1"], start=1200.0, requeue_of="j1")
    fleet.correlate(now=1201.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert (inc.state, inc.resolution) == ("resolved", "the job is running again")


def test_no_incident_is_sticky_past_the_stale_limit(session_factory: sessionmaker[Session]) -> None:
    fleet = _fleet(session_factory, correlator_stale_s=3600.0)
    fleet.node_state("n1", "DOWN")
    fleet.events(_xid(1000.0))
    fleet.correlate(now=1001.0)
    fleet.correlate(now=4700.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert inc.state == "resolved" and "3600" in (inc.resolution or "")


def test_get_incident_and_filters(session_factory: sessionmaker[Session]) -> None:
    fleet = _fleet(session_factory)
    fleet.events(_xid(1000.0))
    fleet.correlate(now=1001.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, node="n1", category="gpu_hardware", job_id="j1")
        assert inc.id is not None
        assert incidents.get_incident(s, incident_id=inc.id).fingerprint == inc.fingerprint
        assert incidents.list_incidents(s, node="other") == []


def test_correctable_ecc_alone_opens_no_incident_but_uncorrectable_does(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    ecc = {"ts": 1000.0, "node": "n1", "source": "dcgm", "kind": EventKind.ECC}
    fleet.events(Event(**ecc, gpu_uuid=gpu_uuid("n1", 0), payload={"sbe": 3}))  # type: ignore[arg-type]
    fleet.correlate(now=1001.0)
    with session_factory() as s:
        assert incidents.list_incidents(s) == []  # healthy HBM corrects bits every day
    fleet.events(Event(**ecc, gpu_uuid=gpu_uuid("n1", 0), payload={"dbe": 1}))  # type: ignore[arg-type]
    fleet.correlate(now=1002.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert (inc.category, inc.blame) == ("gpu_hardware", "node")


def test_a_jobs_own_weak_failure_line_opens_an_incident_a_nodes_weak_signal_does_not(
    session_factory: sessionmaker[Session],
) -> None:
    # NCCL's "unhandled system error" reads interconnect/unknown at 0.45: too weak to name as
    # a cause near someone else's failure, but a job that reports it about itself has failed so
    line = (
        "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation "
        "ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled system error"
    )
    fleet = _fleet(session_factory)
    base = {"ts": 1000.0, "node": "n1", "source": "joblog", "kind": EventKind.OTHER}
    fleet.events(Event(**base, message=line, raw=line, payload={"text": line}))  # type: ignore[arg-type]
    fleet.correlate(now=1001.0)
    with session_factory() as s:
        assert incidents.list_incidents(s) == []  # no job's own line: a node's weak signal
    fleet.events(Event(**base, job_id="j1", message=line, raw=line, payload={"text": line}))  # type: ignore[arg-type]
    fleet.correlate(now=1002.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s)
    assert (inc.category, inc.blame) == ("interconnect", "unknown") and "j1" in inc.job_ids()
