"""Lines a cluster user can print are hostile input: explain and the agent's parsers read a long
run of one character (or one short unit) in about linear time, never retrying a costly pattern
from every position of the run."""

from __future__ import annotations

import json
import time

import pytest

from collector.parse.common import MAX_LINE
from collector.parse.joblog import JobLogParser
from collector.parse.kernel import KernelLogParser
from correlator.explain import explain_text
from timeline.bounds import PAYLOAD_MAX_BYTES
from timeline.models import EventKind

# (prefix, repeated unit): each took seconds at 20,000 characters and minutes at 200,000 while a
# pattern was retried from every position of the run (hosts' NCCL "Using" and zsh prompt, the
# job-log CUDA/NCCL error patterns, nvidia-smi's "key : value", DCGM's labels)
SLOW_SHAPES = [
    ("NCCL INFO ", "."),
    ("NCCL INFO ", "_"),
    ("", "a1"),
    ("[rank0]: ", "a1"),
    ("host:1:2 [0] NCCL INFO ", "1"),
    ("host:1:2 [0] NCCL INFO ", "a-"),
    ("(", " "),
    ("$ ", "\t"),
    ("Traceback ", " "),
    ("RuntimeError: ", "="),
]


@pytest.mark.parametrize(("prefix", "unit"), SLOW_SHAPES)
def test_a_long_run_after_a_prefix_is_explained_in_linear_time(prefix: str, unit: str) -> None:
    line = prefix + unit * (200_000 // len(unit))
    start = time.monotonic()
    explain_text(line)
    assert time.monotonic() - start < 5.0


# Lines as the agent's parsers take them (cut at MAX_LINE): the shapes above, and the kernel
# log's own prefixes in front of a run
PARSER_SHAPES = [
    *SLOW_SHAPES,
    ("NCCL WARN ", "a."),
    ("CUDA error: ", " "),
    ("Jan 12 08:14:03 gpu-01 kernel: ", "a1"),
    ("[12345.678901] NVRM: ", "_"),
    ("pcieport 0000:00:01.0: AER: ", "a:"),
]


def _max_line(prefix: str, unit: str) -> str:
    return (prefix + unit * MAX_LINE)[:MAX_LINE]


def test_the_job_log_parser_reads_max_line_long_runs_in_linear_time() -> None:
    start = time.monotonic()
    for prefix, unit in PARSER_SHAPES:
        parser = JobLogParser(suspects=True)  # as the agent feeds it; fresh, so none is a repeat
        parser.feed(_max_line(prefix, unit))
        parser.flush()
    # quadratic, one such line alone took about a second
    assert time.monotonic() - start < 2.0


def test_the_kernel_log_parser_reads_max_line_long_runs_in_linear_time() -> None:
    start = time.monotonic()
    for prefix, unit in PARSER_SHAPES:
        parser = KernelLogParser()
        parser.feed(_max_line(prefix, unit))
        parser.flush()
    assert time.monotonic() - start < 2.0


# Lines whose payload holds more JSON bytes than an event may: quotes and backslashes escaped,
# characters beyond ASCII, the line's text held twice (an NCCL error and its inline Last error)
OVER_THE_PAYLOAD_BOUND = [
    "CUDA error: " + '"' * MAX_LINE,
    "CUDA error: " + "\\" * MAX_LINE,
    "CUDA error: " + "\u20ac" * MAX_LINE,
    "NCCL WARN " + '"' * MAX_LINE,
    "NCCL error: Last error: " + "a" * MAX_LINE,
]


@pytest.mark.parametrize("line", OVER_THE_PAYLOAD_BOUND, ids=lambda s: s[:14])
def test_a_line_over_the_payload_bound_is_read_with_its_text_cut(line: str) -> None:
    parser = JobLogParser(suspects=True)
    events = parser.feed(line) + parser.flush()
    assert len(events) == 1
    assert len(json.dumps(events[0].payload, ensure_ascii=False).encode()) <= PAYLOAD_MAX_BYTES
    assert explain_text(line).category is not None


def test_a_kernel_line_over_the_payload_bound_is_read_with_its_text_cut() -> None:
    line = "pcieport 0000:00:01.0: AER: " + '"' * MAX_LINE
    parser = KernelLogParser()
    events = parser.feed(line) + parser.flush()
    assert [ev.kind for ev in events] == [EventKind.PCIE_AER]
