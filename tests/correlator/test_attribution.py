"""Attribution: events to the jobs holding their GPU or node; failures to their root cause;
culprit among victims when many ranks of a multi-node job time out in NCCL."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from correlator.holdings import AllocationIndex, GpuDirectory
from tests.correlator.correlator_fleet import NCCL_TIMEOUT, XID31, XID79, Fleet
from timeline.models import Event, EventKind, Severity

NODES = [f"gpu-node-{i:02d}" for i in range(8)]


def _xid79(node: str = "gpu-node-00", ts: float = 2000.0) -> Event:
    return Event(
        ts=ts, node=node, source="kmsg", kind=EventKind.XID, code=79, pci_bus_id="0000:44:00",
        severity=Severity.CRITICAL, message="GPU has fallen off the bus", raw=XID79,
    )  # fmt: skip


def _timeouts(job: str, nodes: list[str], ts: float, seqs: dict[int, int] | None = None) -> list:
    out = []
    for r, node in enumerate(nodes):
        rank = 8 * r
        seq = (seqs or {}).get(rank, 1580)
        out.append(
            Event(
                ts=ts + 0.01 * r,
                node=node,
                source="joblog",
                kind=EventKind.NCCL_TIMEOUT,
                job_id=job,
                severity=Severity.ERROR,
                raw=NCCL_TIMEOUT.format(rank=rank, seq=seq),
                payload={
                    "rank": rank,
                    "seq_num": seq,
                    "op_type": "ALLREDUCE",
                    "timeout_ms": 600000,
                },
            )
        )
    return out


def test_gpu_event_named_by_pci_bus_id_belongs_only_to_the_job_holding_that_gpu(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["gpu-node-00"])
    fleet.job("holder", ["gpu-node-00"], start=1000.0, gpus=[2, 3], user="bob")
    fleet.job("neighbour", ["gpu-node-00"], start=1000.0, gpus=[0, 1], user="carol")
    fleet.events(_xid79())
    fleet.correlate(now=2010.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert inc.job_ids() == {"holder"}
    assert (inc.culprit_node, inc.culprit_gpu_index) == ("gpu-node-00", 2)
    assert inc.culprit_pci_bus_id == "0000:44:00.0"
    assert inc.affected_jobs[0].user == "bob"


def test_node_event_belongs_to_every_job_on_the_node_then(session: Session) -> None:
    fleet = Fleet(sessionmaker(bind=session.get_bind()))
    fleet.nodes(["n1"])
    fleet.job("a", ["n1"], start=100.0, gpus=[0])
    fleet.job("b", ["n1"], start=100.0, gpus=[1])
    fleet.job("finished", ["n1"], start=10.0, end=50.0, gpus=[2])
    index = AllocationIndex.load(session, nodes=["n1"], since=0.0, until=1000.0)
    gpus = GpuDirectory.load(session, nodes=["n1"])
    node_jobs = {j.job_id for j in index.jobs_at("n1", 200.0, None)}
    gpu1_jobs = {j.job_id for j in index.jobs_at("n1", 200.0, gpus.by_index[("n1", 1)])}
    assert node_jobs == {"a", "b"}
    assert gpu1_jobs == {"b"}
    assert {j.job_id for j in index.jobs_at("n1", 20.0, None)} == {"finished"}


def test_xid79_on_one_node_is_the_culprit_and_timeouts_on_the_others_its_symptoms(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES)
    fleet.job("4242", NODES, start=1000.0, user="alice")
    fleet.events(_xid79(ts=2000.0))
    timeouts = _timeouts("4242", NODES, ts=2600.0)
    fleet.events(*timeouts)
    fleet.correlate(now=2610.0)
    with session_factory() as s:
        open_ = incidents.list_incidents(s, state="open")
    assert len(open_) == 1, [i.title for i in open_]
    inc = open_[0]
    assert (inc.category, inc.blame, inc.culprit_node) == ("gpu_hardware", "node", "gpu-node-00")
    assert inc.code == 79 and inc.job_ids() == {"4242"}
    assert len(inc.symptom_event_ids) == len(NODES)
    assert inc.root_cause_event_id not in inc.symptom_event_ids
    assert "0000:44:00.0 (index 2) on gpu-node-00" in inc.explanation
    assert XID79 in inc.explanation and "job 4242 (user alice)" in inc.explanation
    assert "drain" in inc.explanation


def test_hardware_fault_on_a_gpu_the_job_did_not_hold_is_not_its_culprit(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:2])
    fleet.job("small", NODES[:2], start=1000.0, gpus=[0, 1])
    fleet.job("other", ["gpu-node-00"], start=1000.0, gpus=[2])
    fleet.events(_xid79(ts=2000.0))  # GPU index 2: held by "other"
    fleet.events(*_timeouts("small", NODES[:2], ts=2600.0))
    fleet.correlate(now=2610.0)
    with session_factory() as s:
        by_cat = {i.category: i for i in incidents.list_incidents(s, state="open")}
    assert by_cat["gpu_hardware"].job_ids() == {"other"}
    nccl = by_cat["nccl_timeout_unknown"]
    assert nccl.job_id == "small" and nccl.culprit_node is None
    assert "2 NCCL timeouts on 2 hosts" in nccl.explanation and "SeqNum 1580" in nccl.explanation


def test_xid79_is_the_culprit_even_before_the_scheduler_reported_the_jobs_gpus(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:2])  # the nodes and GPUs are known; job 4242's allocation is not yet
    fleet.events(_xid79(ts=2000.0))
    fleet.events(*_timeouts("4242", NODES[:2], ts=2600.0))
    fleet.correlate(now=2610.0)
    with session_factory() as s:
        open_ = incidents.list_incidents(s, state="open")
    assert [(i.category, i.culprit_node) for i in open_] == [("gpu_hardware", "gpu-node-00")]
    assert open_[0].job_ids() == {"4242"} and len(open_[0].symptom_event_ids) == 2


def test_rank_whose_seqnum_lags_names_its_host(session_factory: sessionmaker[Session]) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:4])
    fleet.job("77", NODES[:4], start=1000.0)
    # Rank 16 on gpu-node-02 never finished collective 1579; the others wait in 1580.
    fleet.events(*_timeouts("77", NODES[:4], ts=2600.0, seqs={16: 1579}))
    fleet.correlate(now=2610.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.category, inc.culprit_node) == ("nccl_timeout_unknown", "gpu-node-02")
    assert inc.details["culprit"]["method"] == "seq_lag"
    assert inc.details["culprit"]["rank"] == 16
    assert "last completed collective 1578" in inc.explanation


def test_first_rank_to_fail_is_the_cause_and_later_timeouts_its_symptoms(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:3])
    fleet.job("88", NODES[:3], start=1000.0)
    crash = Event(
        ts=2000.0, node="gpu-node-01", source="joblog", kind=EventKind.CUDA_ERROR, job_id="88",
        raw="RuntimeError: CUDA error: an illegal memory access was encountered",
        payload={"rank": 11},
    )  # fmt: skip
    fleet.events(crash, *_timeouts("88", NODES[:3], ts=2600.0))
    fleet.correlate(now=2610.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.category, inc.blame, inc.job_id) == ("user_code", "job", "88")
    assert inc.details["culprit"]["method"] == "first_failure"
    assert len(inc.symptom_event_ids) == 3


def test_fabric_error_on_one_host_before_the_timeouts_is_the_culprit(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:3])
    fleet.job("89", NODES[:3], start=1000.0)
    ib = Event(
        ts=2000.0, node="gpu-node-01", source="joblog", kind=EventKind.NCCL_ERROR, job_id="89",
        raw="gpu-node-01:1234:1300 [3] NCCL WARN NET/IB : Got completion from peer with error 12",
    )  # fmt: skip
    fleet.events(ib, *_timeouts("89", NODES[:3], ts=2600.0))
    fleet.correlate(now=2610.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.category, inc.culprit_node) == ("interconnect", "gpu-node-01")
    assert inc.details["culprit"]["method"] == "hardware_event"
    assert inc.job_ids() == {"89"} and len(inc.symptom_event_ids) == 3


def test_child_failed_error_host_is_the_last_resort_culprit(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:2])
    fleet.job("99", NODES[:2], start=1000.0)
    # torchrun's report (format as printed by torch.distributed.elastic; host is the FQDN).
    child = Event(
        ts=2601.0, node="gpu-node-00", source="joblog", kind=EventKind.CHILD_FAILED, job_id="99",
        raw=("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
             "Root Cause (first observed failure):\n[0]:\n  time      : 2024-03-21_02:07:09\n"
             "  host      : gpu-node-01.cluster.local\n  rank      : 9 (local_rank: 1)\n"
             "  exitcode  : -6 (pid: 80747)"),
    )  # fmt: skip
    fleet.events(*_timeouts("99", NODES[:2], ts=2600.0), child)
    fleet.correlate(now=2610.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert inc.culprit_node == "gpu-node-01"
    assert inc.details["culprit"]["method"] == "child_failed"
    assert inc.details["culprit"]["rank"] == 9


def test_failed_job_gets_the_highest_priority_cause_on_its_gpus(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1"])
    fleet.job("j1", ["n1"], start=1000.0, gpus=[0], user="dave")
    mmu = Event(
        ts=1990.0, node="n1", source="kmsg", kind=EventKind.XID, code=31, pci_bus_id="0000:18:00",
        raw=XID31.replace("0000:00:06", "0000:18:00"), severity=Severity.ERROR,
    )  # fmt: skip
    failed = Event(
        ts=2000.0, node="n1", source="slurm", kind=EventKind.JOB_STATE, job_id="j1", code=1,
        severity=Severity.ERROR, message="job j1 FAILED", payload={"state": "FAILED"},
    )  # fmt: skip
    fleet.events(mmu, failed)
    fleet.correlate(now=2010.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.category, inc.blame, inc.job_id) == ("user_code", "job", "j1")
    assert inc.code == 31
    assert len(inc.symptom_event_ids) == 1  # the job's FAILED state links to its cause


def test_failure_with_no_cause_on_its_nodes_keeps_the_schedulers_own_verdict(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1", "n2"])
    fleet.job("t1", ["n1"], start=1000.0)
    fleet.events(_xid79(node="n2", ts=1990.0))  # another node: not this job's
    fleet.events(
        Event(ts=2000.0, node="n1", source="slurm", kind=EventKind.JOB_STATE, job_id="t1",
              severity=Severity.ERROR, message="job t1 TIMEOUT", payload={"state": "TIMEOUT"})
    )  # fmt: skip
    fleet.correlate(now=2010.0)
    with session_factory() as s:
        mine = incidents.list_incidents(s, state="open", job_id="t1")
    assert [(i.category, i.job_id) for i in mine] == [("scheduler", "t1")]


def _mmu(ts: float) -> Event:
    return Event(
        ts=ts, node="n1", source="kmsg", kind=EventKind.XID, code=31, pci_bus_id="0000:18:00",
        raw=XID31.replace("0000:00:06", "0000:18:00"), severity=Severity.ERROR,
    )  # fmt: skip


def test_user_fault_xid_repeating_on_one_gpu_under_different_users_blames_the_gpu(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1"])
    fleet.job("u1", ["n1"], start=1000.0, end=2000.0, gpus=[0], user="ivan")
    fleet.job("u2", ["n1"], start=3000.0, gpus=[0], user="judy")
    fleet.events(_mmu(1500.0))
    fleet.correlate(now=1600.0)
    fleet.events(_mmu(3500.0))
    fleet.correlate(now=3600.0)
    with session_factory() as s:
        by_cat = {i.category: i for i in incidents.list_incidents(s)}
    gpu = by_cat["gpu_hardware"]
    assert (gpu.blame, gpu.culprit_node, gpu.culprit_gpu_index) == ("node", "n1", 0)
    assert gpu.job_ids() == {"u2"} and "2 users" in gpu.title
    assert by_cat["user_code"].job_ids() == {"u1"}  # the first fault alone was the program's


def test_user_fault_xid_repeating_for_one_user_stays_the_users(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1"])
    fleet.job("v1", ["n1"], start=1000.0, end=2000.0, gpus=[0], user="ivan")
    fleet.job("v2", ["n1"], start=3000.0, gpus=[0], user="ivan")
    fleet.events(_mmu(1500.0))
    fleet.correlate(now=1600.0)
    fleet.events(_mmu(3500.0))
    fleet.correlate(now=3600.0)
    with session_factory() as s:
        cats = {i.category for i in incidents.list_incidents(s)}
    assert cats == {"user_code"}


def test_kubernetes_pod_oomkilled_without_other_evidence_is_a_host_oom_of_the_job(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(["n1"])
    fleet.job("ml/trainer-0", ["n1"], start=1000.0, gpus=[0], user="kim", account="ml")
    # The shape collector/kubernetes writes for a terminated container.
    pod = Event(
        ts=2000.0, node="n1", source="kubernetes", kind=EventKind.JOB_STATE, job_id="ml/trainer-0",
        code=137, severity=Severity.ERROR,
        message="pod ml/trainer-0 Running -> Failed (OOMKilled, exit 137, container main)",
        payload={"from": "Running", "to": "Failed", "reason": None,
                 "termination": {"reason": "OOMKilled", "exit_code": 137}},
    )  # fmt: skip
    fleet.events(pod)
    fleet.correlate(now=2001.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
        assert incidents.list_incidents(s, updated_since=inc.updated_ts) == []
    assert (inc.category, inc.blame, inc.job_id) == ("oom_host", "job", "ml/trainer-0")
    assert inc.explanation.startswith("Job ml/trainer-0 (user kim)")


def test_the_first_rank_to_time_out_is_a_victim_not_named_culprit(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:3])
    fleet.job("90", NODES[:3], start=1000.0)
    for i, node in enumerate(NODES[:3]):  # same SeqNum, watchdogs firing 30 s apart
        fleet.events(*_timeouts("90", [node], ts=2600.0 + 30 * i))
    fleet.correlate(now=2700.0)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert inc.culprit_node is None and inc.details["culprit"]["method"] == "unknown"


def test_a_hardware_fault_delivered_after_the_timeouts_becomes_their_root_cause(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:3])
    fleet.job("late", NODES[:3], start=1000.0)
    fleet.events(*_timeouts("late", NODES[:3], ts=2600.0))
    fleet.correlate(now=2610.0)  # nothing explains them yet
    fleet.events(_xid79(node="gpu-node-01", ts=2000.0))  # the kernel log arrives late
    fleet.correlate(now=2620.0)
    with session_factory() as s:
        open_ = incidents.list_incidents(s, state="open")
        (old,) = incidents.list_incidents(s, state="resolved")
    (inc,) = open_
    assert (inc.category, inc.culprit_node, inc.code) == ("gpu_hardware", "gpu-node-01", 79)
    assert len(inc.symptom_event_ids) == 3 and inc.job_ids() == {"late"}
    assert old.category == "nccl_timeout_unknown"
    assert (old.resolution or "").startswith("superseded")


def test_a_correctable_ecc_blip_near_the_timeouts_is_not_named_their_cause(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES[:4])
    fleet.job("ecc", NODES[:4], start=1000.0)
    sbe = Event(ts=2300.0, node="gpu-node-03", source="nvml", kind=EventKind.ECC,
                pci_bus_id="0000:18:00", payload={"sbe": 1})  # fmt: skip
    fleet.events(sbe, *_timeouts("ecc", NODES[:4], ts=2600.0, seqs={16: 1579}))
    fleet.correlate(now=2610.0)
    with session_factory() as s:
        nccl = incidents.list_incidents(s, category="nccl_timeout_unknown")
    assert [(i.culprit_node, i.details["culprit"]["method"]) for i in nccl] == [
        ("gpu-node-02", "seq_lag")
    ]
