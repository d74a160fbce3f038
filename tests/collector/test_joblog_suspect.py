"""Failure-worded job log lines that no recognizer reads (collector/parse/joblog_suspect.py):
passed on for the correlator's rules when the parser is the agent's, bounded per window."""

from __future__ import annotations

import pytest

from collector.parse.joblog import JobLogParser, parse_job_text
from collector.parse.joblog_suspect import MAX_PER_WINDOW
from correlator.rules import classify_event
from timeline.models import EventKind

GLOO = (
    "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:799] "
    "connect [10.40.2.17]:29517: Connection refused"
)


def test_an_unrecognised_failure_line_reaches_the_correlators_rules_as_explain_reads_it() -> None:
    (ev,) = parse_job_text(GLOO, node="gpu-a-01", job_id="7", suspects=True)
    assert ev.kind is EventKind.OTHER and ev.payload == {
        "text": GLOO,
        "unclassified": True,
        "ts_unknown": True,
    }
    verdict = classify_event(ev)
    assert verdict is not None and (verdict.category, verdict.culprit) == (
        "interconnect",
        "10.40.2.17",
    )


def test_only_the_agents_parser_passes_such_lines_on() -> None:
    assert parse_job_text(GLOO) == []  # explain's reading: its own fallback reads the line


@pytest.mark.parametrize(
    "line",
    [
        "epoch 3 step 1200 loss 2.31 lr 3e-4 tokens/s 41234",
        "timeline of the run saved to /scratch/run7/terminal.log",
        "error",  # too short to say anything
        "INFO data loader worker 3 prefetch queue 12",
    ],
)
def test_a_line_without_a_failure_word_is_not_passed_on(line: str) -> None:
    assert parse_job_text(line, suspects=True) == []


def test_a_recognised_line_is_read_by_its_recognizer_not_passed_on_as_text() -> None:
    line = "RuntimeError: CUDA error: an illegal memory access was encountered"
    (ev,) = parse_job_text(line, suspects=True)
    assert ev.kind is EventKind.CUDA_ERROR and "unclassified" not in ev.payload


def test_a_chatty_job_passes_on_at_most_the_bound_per_window_and_counts_the_rest() -> None:
    parser = JobLogParser(job_id="7", suspects=True, flood_window_s=300.0)
    out = []
    for i in range(MAX_PER_WINDOW + 50):
        out += parser.feed(f"worker {i}: could not open shard {i}, skipping", ts=1_000.0 + i)
    out += parser.flush()
    assert len(out) == MAX_PER_WINDOW and parser.suspects_dropped == 50
    # the next window passes lines on again
    later = parser.feed("worker 9999: could not open shard 9999, skipping", ts=1_000.0 + 600)
    assert len(later + parser.flush()) == 1 and parser.suspects_dropped == 50
