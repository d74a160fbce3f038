"""The agent's job-log parser reads lines as the job wrote them, not the runtime or launcher
record around them: the same events from a CRI log file, docker's json-file, Open MPI's tagged
output or Ray's worker prefix as from the bare lines."""

from __future__ import annotations

import time
from typing import Any

import pytest

from collector.parse.delivery import undelivered_line
from collector.parse.joblog import parse_job_line, parse_job_text
from correlator.explain.reasoning import conclude, findings
from tests.correlator.test_explain_corpus import CORPUS, TRAINING
from tests.correlator.test_explain_delivery_metamorphic import WRAPPERS

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.mark.parametrize(
    "delivered",
    [
        f"2025-03-04T05:06:07.123456789Z stderr F {OOM}",
        f"2025-03-04T05:06:07.123456789+02:00 stdout P {OOM}",
        '{"log":"' + OOM + '\\n","stream":"stderr","time":"2025-03-04T05:06:07.1Z"}',
        '{"MESSAGE":"' + OOM + '","_HOSTNAME":"gpu-07"}',
        f"[pod/trainer-0/pytorch] {OOM}",
        f"[1,3]<stderr>:{OOM}",
        f"[1,3][gpu-07:4242]<stderr>: {OOM}",
        f"(RayTrainWorker pid=4242, ip=10.0.0.7) {OOM}",
        f"(raylet, ip=10.0.0.7) {OOM}",
    ],
)
def test_a_delivered_line_reads_as_the_line_the_job_wrote(delivered: str) -> None:
    assert undelivered_line(delivered) == OOM
    event = parse_job_line(delivered, node="gpu-07", job_id="42")
    assert event is not None and event.payload.get("error") == parse_job_line(OOM).payload.get(
        "error"
    )  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "line",
    [
        f"12: {OOM}",  # srun --label or a program's own numbering: the parser's prefix rules
        f"[3] {OOM}",
        f"2025-03-04T05:06:07Z {OOM}",  # a time stamp a program prints itself
        '{"log": 3, "stream": "stderr"}',  # JSON, but not a runtime record
        '{"log":"unterminated',
        "(pid=abc) not Ray",
    ],
)
def test_a_line_that_only_might_be_delivered_is_left_as_it_is(line: str) -> None:
    assert undelivered_line(line) == line


def test_hostile_lines_cost_bounded_time() -> None:
    lines = ["(" + "a" * 8000 + " pid=1", "[" + "x," * 4000 + "]<stderr>:", "{" + '"' * 8000 + "}"]
    started = time.perf_counter()
    for line in lines:
        undelivered_line(line)
    assert time.perf_counter() - started < 1.0


def _verdict(text: str) -> Any:
    found = conclude(findings(parse_job_text(text, node="n", job_id="j")))
    return None if found is None else (found.verdict.category, found.verdict.blame)


# The per-line deliveries the agent meets in job output files (a pod's CRI or json-file log,
# a launcher's tagged stdout); kubectl's time stamps and srun/torchrun labels are left to the
# parser's own prefix rules and to `explain`, which sees the whole text.
LIVE = ("cri", "docker_json", "mpirun_tag_output")


# The training cases on which the job-log parser alone concludes something.
READ = [c for c in TRAINING if _verdict((CORPUS / c["file"]).read_text("utf-8")) is not None]
# (case, delivery) pairs that read differently, each with its reason.
KNOWN = {
    ("045_device-assert-wrapped-lines.txt", "mpirun_tag_output"): "a terminal paste's wrapped "
    "continuation line keeps its leading space, which the tag's optional space (PMIx writes "
    "': ') takes, so the parser no longer joins it; mpirun's own output has no such wrap",
}


def test_most_training_cases_are_read_by_the_job_log_parser() -> None:
    assert len(READ) >= 150, len(READ)


@pytest.mark.parametrize("case", READ, ids=lambda c: c["file"])
def test_the_job_log_parser_concludes_the_same_on_delivered_training_cases(
    case: dict[str, Any],
) -> None:
    text = (CORPUS / case["file"]).read_text("utf-8")
    plain = _verdict(text)
    changed = [name for name in LIVE if _verdict(WRAPPERS[name](text)) != plain]
    assert changed == [name for name in LIVE if (case["file"], name) in KNOWN]
