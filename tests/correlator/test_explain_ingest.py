"""Live incidents agree with `explain` on the corpus: the same text through the agent's parsers,
the store (`timeline.service.append_batch`) and the correlator gives the same category and blame.

A case goes through ingest when the agent's own log parsers (kernel log, job log) turn its text
into the events `explain` concludes from. The others cannot, and are counted by reason:

- `structured`: explain reads tool output (nvidia-smi, sacct, dcgmi diag, dcgm-exporter) that
  the agent collects through its own sources (NVML, DCGM, Slurm), not as log text;
- `not parsed`: the evidence is text a node agent does not read, so explain alone sees it:
  kubectl output and Kubernetes events, Slurm controller, sacct/sinfo/scontrol and other admin
  commands, batch-system mail and accounting records, prose quotes, and lines the agent cannot
  tell from healthy output (a failure stated without any failure word);
- `not an incident`: a job its owner cancelled, which the live correlator does not file.

The agent does read job stdout/stderr (launcher exit and signal lines, MPI and Ray runtime
reports, UCX/NCCL/c10d socket and fabric lines, slurmstepd/srun errors) and the kernel log
(host lockups, machine checks, I/O errors besides the GPU driver's lines; EDAC corrected-error
lines, each a report, which explain and the live correlator sum per memory module alike,
collector/parse/kernel_edac.py): those go through.
Disagreements are listed by file for training cases and only counted for the held-out cases
(validation, validation_3, validation_4), whose per-case results are not shown; see the corpus
README. The agent's job-log source also passes on failure-worded lines that no recognizer reads
(collector/parse/joblog_suspect.py) for the correlator's rules, as `suspects=True` does here.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import sessionmaker

from collector.parse.joblog import parse_job_text
from collector.parse.kernel import parse_kernel_text
from correlator import service as incidents
from correlator.explain import explain_bytes, readings
from correlator.explain.readers import read
from correlator.explain.reasoning import Conclusion, conclude, findings
from correlator.flows import correlate_once
from timeline import db, service
from timeline.db import unit_of_work
from timeline.models import Allocation, Batch, Event, EventKind, GpuInfo, Job, Node, Scheduler
from timeline.settings import Settings

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
LABELS: list[dict[str, Any]] = json.loads((CORPUS / "labels.json").read_text("utf-8"))
T0 = 1_700_000_000.0
DAY = 86_400.0


def _pair(conclusion: Conclusion | None) -> tuple[str | None, str] | None:
    if conclusion is None:
        return None
    return (conclusion.verdict.category, conclusion.verdict.blame)


def _owner_cancel(conclusion: Conclusion) -> bool:
    return all(
        f.event.kind is EventKind.JOB_STATE
        and f.event.payload.get("state") == "CANCELLED"
        and "reason" not in f.event.payload
        for f in conclusion.support
    )


def _why_not(text: str, agent: list[Event], want: tuple[str | None, str]) -> str | None:
    """None when the case can go through ingest, else the reason it cannot."""
    local = conclude(findings(agent))
    if _pair(local) == want and local is not None:
        return "not an incident" if _owner_cancel(local) else None
    # as explain read it: as it came, or (a wrapped paste) with its lines joined again
    concluded = (conclude(findings(read(again)[0])) for again, _ in readings(text))
    explained = next((c for c in concluded if c is not None), None)
    assert explained is not None
    pattern = any("pattern" in f.event.payload for f in explained.support)
    return "not parsed" if pattern else "structured"


def _batch(**items: Any) -> Batch:
    return Batch(agent="test", node="server", batch_id=uuid.uuid4().hex, **items)


# Held-out cases whose live incident disagrees with explain (counted, never listed): one from
# validation_3's arrival until round eight let a job's own weak failure line open an incident.
HELD_OUT_DISAGREEMENTS = 0


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every explained case through the store and one correlator pass; results per case."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ingest') / 'fleetmedic.db'}"
    db.upgrade(url)
    engine = db.make_engine(url)
    factory = sessionmaker(engine)
    gpus, nodes, jobs, allocs, events = [], [], [], [], []
    cases: dict[str, dict[str, Any]] = {}
    splits = {case["file"]: case["split"] for case in LABELS}
    for i, case in enumerate(LABELS):
        text = (CORPUS / case["file"]).read_text("utf-8")
        got = explain_bytes(text.encode()).to_dict()
        if got["category"] is None:
            continue  # nothing explained: nothing to agree with
        node, job, base = f"n{i:03d}", f"j{i:03d}", T0 + i * DAY
        agent = parse_kernel_text(text, node=node) + parse_job_text(
            text, node=node, job_id=job, suspects=True
        )
        want = (got["category"], got["blame"])
        cases[case["file"]] = {
            "want": want,
            "node": node,
            "job": job,
            "split": splits[case["file"]],
        }
        why = _why_not(text, agent, want)
        if why:
            cases[case["file"]]["why_not"] = why
            continue
        for k, ev in enumerate(agent):  # the agent stamps what it reads with its own clock
            ev.ts, ev.node = base + 60 + k, node
        events += agent
        gpus.append(GpuInfo(uuid=f"GPU-{node}", node=node, index=0, pci_bus_id="0000:44:00.0"))
        nodes.append(Node(name=node, scheduler=Scheduler.SLURM, state="MIXED", gpu_count=1))
        jobs.append(
            Job(scheduler=Scheduler.SLURM, job_id=job, user="alice", state="RUNNING",
                start_ts=base, end_ts=base + 7200, nodes=[node], gpus=1)
        )  # fmt: skip
        allocs.append(
            Allocation(scheduler=Scheduler.SLURM, job_id=job, node=node, gpu_index=0,
                       gpu_uuid=f"GPU-{node}", start_ts=base, end_ts=base + 7200)
        )  # fmt: skip
    with unit_of_work(factory) as s:
        service.append_batch(s, batch=_batch(gpus=gpus, nodes=nodes))
        service.append_batch(s, batch=_batch(jobs=jobs, allocations=allocs))
        service.append_batch(s, batch=_batch(events=events), received_ts=T0)
    settings = Settings(database_url=url, correlator_max_events=len(events) + 1000)
    correlate_once(factory, settings=settings, now=T0 + (len(LABELS) + 30) * DAY)
    with unit_of_work(factory) as s:
        filed = incidents.list_incidents(s, limit=100_000)
    engine.dispose()
    for entry in cases.values():
        entry["live"] = {
            (inc.category, inc.blame)
            for inc in filed
            if inc.culprit_node == entry["node"] or entry["job"] in inc.job_ids()
        }
    return cases


def test_live_incidents_agree_with_explain_wherever_the_case_goes_through_ingest(
    outcome: dict[str, Any],
) -> None:
    through = {f: c for f, c in outcome.items() if "why_not" not in c}
    disagree = {f: (c["want"], sorted(c["live"], key=str)) for f, c in through.items()}
    disagree = {f: d for f, d in disagree.items() if d[0] not in outcome[f]["live"]}
    assert {f: d for f, d in disagree.items() if outcome[f]["split"] == "training"} == {}
    # Held-out cases are counted, never listed (naming one would show its verdict).
    assert sum(outcome[f]["split"] != "training" for f in disagree) <= HELD_OUT_DISAGREEMENTS
    # most of the corpus goes through the agent's own parsers (448 of the explained cases since
    # the agent passes on failure-worded lines for the correlator's rules; 346 before)
    assert len(through) >= 440


def test_cases_that_cannot_go_through_ingest_have_a_reason(outcome: dict[str, Any]) -> None:
    reasons = Counter(c.get("why_not", "through ingest") for c in outcome.values())
    assert set(reasons) <= {"through ingest", "structured", "not parsed", "not an incident"}
    # an owner's own cancel (slurmstepd "CANCELLED AT" with no DUE TO) opens no incident: one
    # training case and three held-out cases read so (the third held-out one came with round
    # twenty-two's draw; counted, never listed)
    assert reasons["not an incident"] <= 4


def test_a_dimm_corrected_error_storm_goes_through_ingest_as_a_node_fault(
    outcome: dict[str, Any],
) -> None:
    # training case 836: one module's EDAC CE lines over mcelog's DIMM trigger, which the agent
    # reads one event a line and the live correlator sums (correlator/edac.py)
    case = outcome["836_errol-edac-ce-dimm-machine-check-events.txt"]
    assert "why_not" not in case and case["want"] == ("node", "node")
    assert ("node", "node") in case["live"]
