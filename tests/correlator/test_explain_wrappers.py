"""Delivery wrappers (correlator/explain/wrappers.py), each in its emitter's exact format with
made-up values; the ones that name a host feed the culprit choice like pdsh's prefix."""

from __future__ import annotations

import json
import time

import pytest

from collector.parse.joblog import parse_job_text
from correlator.explain import explain_text
from correlator.explain.readers import read_events
from correlator.explain.wrappers import undelivered
from tests.correlator.wrapper_lines import ECC, ILLEGAL, TIMEOUT, XID


@pytest.mark.parametrize(
    "wrapped",
    [
        f"2025-01-12T08:14:03.482913004Z {ILLEGAL}",  # kubectl logs --timestamps
        f"2025-01-12T08:14:03.482913004Z stderr F {ILLEGAL}",  # CRI log file
        json.dumps({"log": ILLEGAL + "\n", "stream": "stderr", "time": "2025-01-12T08:14:03Z"}),
        f"\x1b[31m{ILLEGAL}\x1b[0m",  # ANSI colour
        f"{ILLEGAL}\r\n",  # CRLF
        f" 3: {ILLEGAL}",  # srun --label
        f"P1 12: {ILLEGAL}",  # srun --label, het job
        f"[1,3]<stderr>:{ILLEGAL}",  # mpirun --tag-output (ORTE)
        f"[prterun-login1-2231@1,3]<stderr>: {ILLEGAL}",  # PRRTE/PMIx --output tag
        f"Sun Jan 12 08:14:03 2025[1,3]<stderr>:{ILLEGAL}",  # --timestamp-output --tag-output
        f"Sun Jan 12 08:14:03 2025<stderr>:{ILLEGAL}",  # --timestamp-output alone
        f"[3] {ILLEGAL}",  # MPICH Hydra -prepend-rank
        f"[default3]:{ILLEGAL}",  # torchrun --tee
        f"[rank3]:{ILLEGAL}",  # TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[rank${rank}]:"
        f"(RayTrainWorker pid=48211) {ILLEGAL}",  # Ray, the driver's own node
        f"[pod/trainer-worker-0/pytorch] 2025-01-12T08:14:03.482913004Z {ILLEGAL}",
    ],
)
def test_each_wrapper_is_taken_off_and_the_line_quoted_as_delivered(wrapped: str) -> None:
    assert undelivered(wrapped).lines[0] == ILLEGAL
    got = explain_text(wrapped)
    assert (got.category, got.blame) == ("user_code", "job")
    delivered = wrapped.replace("\x1b[31m", "").replace("\x1b[0m", "").rstrip("\r\n")
    assert got.evidence == [delivered]


def test_partial_cri_and_docker_records_join_into_one_line() -> None:
    cri = (
        "2025-01-12T08:14:03.000000001Z stderr P RuntimeError: CUDA error: an illegal \n"
        "2025-01-12T08:14:03.000000002Z stderr F memory access was encountered"
    )
    docker = "\n".join(
        json.dumps({"log": part, "stream": "stderr", "time": "2025-01-12T08:14:03Z"})
        for part in ("RuntimeError: CUDA error: an illegal ", "memory access was encountered\n")
    )
    for text in (cri, docker):
        assert undelivered(text).lines == [ILLEGAL]
        got = explain_text(text)
        assert (got.category, got.blame) == ("user_code", "job")
        assert got.evidence == text.splitlines()


def test_journald_json_names_the_host_of_its_message() -> None:
    record = {"_HOSTNAME": "gpu-node-17", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": XID}
    got = explain_text(json.dumps(record))
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-node-17")
    record["MESSAGE"] = list(XID.encode())  # journald's byte-array form
    assert explain_text(json.dumps(record)).node == "gpu-node-17"


@pytest.mark.parametrize(
    "line",
    [
        f"Jan 12 08:14:03.482913 gpu-node-17 kernel: {XID}",  # journalctl -o short-precise
        f"2025-01-12T08:14:03+0000 gpu-node-17 kernel: {XID}",  # -o short-iso
        f"2025-01-12T08:14:03+00:00 gpu-node-17 kernel: {XID}",  # short-iso, newer systemd
        f"2025-01-12T08:14:03.482913+00:00 gpu-node-17 kernel: {XID}",  # -o short-iso-precise
    ],
)
def test_journalctl_short_formats_keep_their_host(line: str) -> None:
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-node-17")


@pytest.mark.parametrize(
    ("waiter", "culprit", "host"),
    [
        (
            "(RayTrainWorker pid=48211, ip=10.12.0.21) ",
            "(RayTrainWorker pid=51007, ip=10.12.0.34) ",
            "10.12.0.34",
        ),
        ("[pod/trainer-worker-0/pytorch] ", "[pod/trainer-worker-1/pytorch] ", "trainer-worker-1"),
        ("[1@1,0][gpu-a07:48211]<stderr>: ", "[1@1,1][gpu-a09:51007]<stderr>: ", "gpu-a09"),
    ],
)
def test_a_host_naming_wrapper_makes_the_faulting_host_the_culprit(
    waiter: str, culprit: str, host: str
) -> None:
    # the host that printed only a timeout is never the culprit (issue #11)
    got = explain_text(f"{waiter}{TIMEOUT}\n{culprit}{ECC}")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", host)


def test_a_line_that_names_its_host_keeps_it_over_the_wrapper_host() -> None:
    text = f"(raylet, ip=10.12.0.21) Jan 12 08:14:03 gpu-node-17 kernel: {XID}"
    assert explain_text(text).node == "gpu-node-17"


def test_ambiguous_shapes_are_taken_only_when_most_lines_have_them() -> None:
    table = "Failures:\n[1]:\n  host      : gpu-07\n  exitcode  : 1 (pid: 3669031)"
    assert undelivered(table).lines == table.splitlines()  # a ChildFailedError table
    mixed = f"2025-01-12T08:14:03.482913004Z start\nplain line one\nplain line two\n{ILLEGAL}"
    assert undelivered(mixed).lines[0].startswith("2025-")


@pytest.mark.parametrize(
    ("text", "label"),
    [
        (f"[rank3]:{TIMEOUT}\n[rank3]:{ILLEGAL}", {"log_rank": 3, "rank": 3}),
        (f"[default1]:{ILLEGAL}\n[default0]:{TIMEOUT}", {"log_rank": 1, "rank": 1}),
        (f"12: {ILLEGAL}\n 3: {TIMEOUT}", {"srun_task": 12}),
    ],
)
def test_a_launcher_label_rank_reaches_the_event_as_the_agent_parser_gives_it(
    text: str, label: dict[str, int]
) -> None:
    explained = read_events(text)
    live = parse_job_text(text)
    assert [(e.kind, e.payload) for e in explained] == [(e.kind, e.payload) for e in live]
    cuda = next(e for e in explained if e.kind == "cuda_error")
    assert {k: cuda.payload.get(k) for k in label} == label


def test_plain_text_passes_through_unchanged() -> None:
    text = f"gpu-07: {ILLEGAL}\n{TIMEOUT}\n"
    got = undelivered(text)
    assert got.lines == text.splitlines() and got.verbatim == {} and set(got.hosts) == {None}


@pytest.mark.parametrize(
    "hostile",
    [
        "\x1b[" + "1;" * 200_000,
        "[" * 200_000 + "]:",
        "(" + "a" * 200_000 + " pid=1, ip=" + "1" * 200_000,
        "{" + '"log":"' + "\\" * 200_000,
        "2025-01-12T08:14:03." + "9" * 200_000 + "Z stderr F x",
        "[pod/" + "a/" * 100_000 + "] x",
    ],
)
def test_hostile_lines_are_read_in_linear_time(hostile: str) -> None:
    start = time.monotonic()
    undelivered("\n".join([hostile] * 3))
    explain_text(hostile)
    assert time.monotonic() - start < 5.0


def test_a_stamp_finer_than_journalctls_never_reads_a_host_from_the_next_word() -> None:
    line = "2025-01-12T08:14:03.482913004Z CUDA error: an illegal memory access was encountered"
    # "CUDA error: " has the shape of journalctl's "host program: ", but a stamp finer than
    # microseconds is kubectl's or docker's, whose lines name no host
    lines = [line, "2025-01-12T08:14:04.000000001Z Traceback (most recent call last):"]
    assert undelivered("\n".join(lines)).hosts == [None, None]
    assert explain_text(f"{line}\n{ILLEGAL}").node is None


def test_a_block_quoted_paste_is_read_and_quoted_as_pasted() -> None:
    text = (
        "> Traceback (most recent call last):\n"
        ">\n"
        f"> > gpu-node-17:2841:2910 [3] NCCL WARN Cuda failure 'out of memory'\n"
        f"> {ILLEGAL}"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("oom_gpu", "job", "gpu-node-17")
    assert "> > gpu-node-17:2841:2910 [3] NCCL WARN Cuda failure 'out of memory'" in got.evidence


def test_a_code_blocks_indentation_goes_and_the_lines_own_stays() -> None:
    text = (
        f"    Jan 12 08:14:03 gpu-node-17 kernel: {XID}\n"
        "\n"
        "    torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "      host      : gpu-node-17\n"
    )
    d = undelivered(text)
    assert d.lines[0].startswith("Jan 12 ") and d.lines[3] == "  host      : gpu-node-17"
    assert explain_text(text).node == "gpu-node-17"


def test_only_a_paste_with_every_line_apart_loses_its_blank_lines() -> None:
    spaced = f"line one\n\nline two\n\n{ILLEGAL}\n"
    assert undelivered(spaced).lines == ["line one", "line two", ILLEGAL]
    paragraphs = f"line one\nline two\n\n{ILLEGAL}\n"
    assert undelivered(paragraphs).lines == ["line one", "line two", "", ILLEGAL]


@pytest.mark.parametrize(
    "text",
    [
        f"Jan 12 08:14:03 gpu-node-17 kernel: {XID}",
        "Message from syslogd@gpu-node-17 at Jun 17 13:06:42 ...\n kernel:[1234.5678] watchdog: "
        "BUG: soft lockup - CPU#3 stuck for 22s! [python:1234]",
        "[gpu-node-17:10319] *** Process received signal ***\n"
        "[gpu-node-17:10319] Signal: Segmentation fault (11)",
    ],
)
def test_a_paste_with_no_break_spaces_keeps_its_host_and_quotes_as_pasted(text: str) -> None:
    pasted = text.replace(" ", "\u00a0")  # a page renders runs of spaces so
    plain, got = explain_text(text), explain_text(pasted)
    assert (got.category, got.blame, got.node) == (plain.category, plain.blame, "gpu-node-17")
    assert got.evidence and all("\u00a0" in line for line in got.evidence)
