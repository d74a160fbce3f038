"""End to end on real log text: the collectors' own parsers turn a real kernel Xid 79 line and
real PyTorch NCCL watchdog output into events; the correlator names the culprit among victims."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from collector.parse.joblog import parse_job_text
from collector.parse.kernel import parse_kernel_text
from correlator import service as incidents
from tests.correlator.correlator_fleet import Fleet

# https://github.com/NVIDIA/NVSentinel/issues/155 quotes this kernel line (bus 0000:44:00).
KERNEL = "[ 1843.308145] NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.\n"
# https://github.com/hiyouga/LlamaFactory/issues/7396: every rank times out in SeqNum 1580 and
# reports last completed work 1579 (lines as posted, ranks 0-3 on one host, 4-7 on the other).
WATCHDOG = (
    "[rank{r}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=466119168, "
    "NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
)
LAST_WORK = (
    "[rank{r}]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank {r}] Exception "
    "(either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: "
    "{enq}, last completed NCCL work: {done}."
)
NODES = ["gpu-node-00", "gpu-node-01"]
BOOT = 100_000.0


def _job_log(ranks: range, seq: int = 1580) -> str:
    lines = []
    for r in ranks:
        lines.append(WATCHDOG.format(r=r, seq=seq))
        lines.append(LAST_WORK.format(r=r, seq=seq, enq=seq + 2, done=seq - 1))
    return "\n".join(lines)


def _fleet(session_factory: sessionmaker[Session]) -> Fleet:
    fleet = Fleet(session_factory)
    fleet.nodes(NODES)
    fleet.job("7396", NODES, start=BOOT, gpus=[0, 1, 2, 3], user="leo")
    return fleet


def test_parsed_kernel_xid79_is_the_culprit_of_parsed_nccl_timeouts_on_both_hosts(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.job("other", ["gpu-node-00"], start=BOOT, gpus=[4, 5, 6, 7])
    xid = parse_kernel_text(KERNEL, node="gpu-node-00", boot_ts=BOOT)
    fleet.events(*xid)
    for i, node in enumerate(NODES):
        ranks = range(4 * i, 4 * i + 4)
        fleet.events(*parse_job_text(_job_log(ranks), node=node, job_id="7396", ts=BOOT + 2500))
    fleet.correlate(now=BOOT + 2510)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.category, inc.culprit_node, inc.code) == ("gpu_hardware", "gpu-node-00", 79)
    assert inc.culprit_gpu_index == 2  # bus 0000:44:00 is GPU 2 in the test fleet; job 7396's
    assert inc.job_ids() == {"7396"}
    assert len(inc.symptom_event_ids) >= 2
    assert KERNEL.strip() in inc.explanation


def test_parsed_timeouts_where_every_rank_is_level_name_no_culprit(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    for i, node in enumerate(NODES):
        ranks = range(4 * i, 4 * i + 4)
        fleet.events(*parse_job_text(_job_log(ranks), node=node, job_id="7396", ts=BOOT + 2500))
    fleet.correlate(now=BOOT + 2510)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.category, inc.blame, inc.culprit_node) == ("nccl_timeout_unknown", "unknown", None)
    assert inc.details["culprit"]["method"] == "unknown"
    assert "SeqNum 1580" in inc.explanation and "ALLREDUCE" in inc.explanation


def test_parsed_rank_stuck_one_collective_behind_is_named(
    session_factory: sessionmaker[Session],
) -> None:
    fleet = _fleet(session_factory)
    fleet.events(*parse_job_text(_job_log(range(0, 4)), node=NODES[0], job_id="7396",
                                 ts=BOOT + 2500))  # fmt: skip
    behind = _job_log(range(4, 5), seq=1579) + "\n" + _job_log(range(5, 8))
    fleet.events(*parse_job_text(behind, node=NODES[1], job_id="7396", ts=BOOT + 2500))
    fleet.correlate(now=BOOT + 2510)
    with session_factory() as s:
        (inc,) = incidents.list_incidents(s, state="open")
    assert (inc.culprit_node, inc.details["culprit"]["method"]) == ("gpu-node-01", "seq_lag")
    assert inc.details["culprit"]["rank"] == 4
