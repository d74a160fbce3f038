"""Metamorphic: the order in which several ranks' lines reach a merged log must not move a verdict.

srun --label (SchedMD/slurm src/api/step_io.c), pdsh (chaos/pdsh src/pdsh/dsh.c), mpirun
--tag-output (open-mpi/ompi orte/mca/iof) and torchrun's "[rankN]:" (torch/distributed/elastic/
multiprocessing/tail_log.py) each forward every rank's or host's output as it arrives: the lines
of one stream keep their order, the streams are merged in an order nobody chose. So do ranks
that share one output file, each behind NCCL's "host:pid:tid [dev]" (one process's stream).
Every training case explain gets right whose lines carry such a per-line stream prefix, read by
the project's own readers (wrappers.undelivered's streams and hosts, hosts.prefix_hosts' pdsh
hosts, hosts.NCCL_PREFIX), is re-merged in two orders, a seeded shuffle and the streams in
reverse order of their first line, and must keep its category, blame and culprit. A line no
prefix names stays where it is (a paste's header, the launcher's own message); a blank or
indented one stays with the line before it (the end or continuation of that stream's record),
as readers.stream_groups reads it. Clocks fix the order of the lines that carry them: two
lines of different streams with different clock texts keep their order, a line without one may
arrive anywhere between its own stream's neighbours. Of the 523 cases checked, 31 have two
streams or more; in 7 of those the clocks leave no line free to move, so 24 cases (48 merges)
are re-merged. Only training cases are read here; their texts are never printed (ids are file
names and variants).
"""

from __future__ import annotations

import random
import re
import zlib

import pytest

from correlator.explain import explain_text
from correlator.explain.hosts import NCCL_PREFIX, prefix_hosts
from correlator.explain.readers import reads_fault
from correlator.explain.wrappers import undelivered
from tests.correlator.corpus_open import KNOWN_TRAINING_MISSES, OPEN_ROUNDS
from tests.correlator.metamorphic_params import case_text, original_verdict
from tests.correlator.test_explain_corpus import TRAINING

VARIANTS = (0, 1)

# (case file, variant) pairs whose verdict legitimately depends on the arrival order, with the
# emitter's reason.
SKIPPED: dict[tuple[str, int], str] = {}

# A clock near a line's start: a time of day (syslog, ISO, ctime, Python logging) or printk's
# "[%5lu.%06lu]"; lines that carry one are ordered by it, not by arrival.
_CLOCK = re.compile(r"\d\d:\d\d:\d\d(?:[.,]\d+)?|\[ *\d+\.\d{6}\]")
_CLOCK_SPAN = 64


def _clock(line: str) -> str | None:
    m = _CLOCK.search(line[:_CLOCK_SPAN])
    return m.group() if m else None


# A unit is one stream's line with the blank or indented unnamed lines after it.
_Unit = tuple[str | None, list[str]]


def _units(text: str) -> list[_Unit] | None:
    """The text's lines as units, each with its stream key (None: no prefix names it), or None
    when the delivery reading does not keep the text's lines one to one."""
    lines = text.splitlines()
    got = undelivered(text)
    if len(got.lines) != len(lines):
        return None
    pdsh = prefix_hosts(got.lines, reads_fault)
    units: list[_Unit] = []
    for line, bare, p, h, s in zip(lines, got.lines, pdsh, got.hosts, got.streams, strict=True):
        m = NCCL_PREFIX.match(bare)
        nccl = f"{m['h']}:{m['pid'] or ''}" if m else None
        key = " ".join(k.lower() for k in (s, h, p, nccl) if k) or None
        tail = not line.strip() or line[:1].isspace()
        if key is None and tail and units and units[-1][0] is not None:
            units[-1][1].append(line)
        else:
            units.append((key, [line]))
    return units


def _runs(units: list[_Unit]) -> list[list[_Unit]]:
    """The runs of named units between unnamed ones (which stay where they are)."""
    runs: list[list[_Unit]] = []
    for i, unit in enumerate(units):
        if unit[0] is None or i == 0 or units[i - 1][0] is None:
            runs.append([])
        runs[-1].append(unit)
    return runs


def _free(run: list[_Unit], placed: list[bool], i: int) -> bool:
    """Whether unit i may come next: no earlier unit of another stream is still to come whose
    clock differs from its own (two clocks fix the order of the lines that carry them)."""
    clock = _clock(run[i][1][0])
    return clock is None or not any(
        not placed[j] and run[j][0] != run[i][0] and _clock(run[j][1][0]) not in (None, clock)
        for j in range(i)
    )


def _merged(run: list[_Unit], variant: int, rng: random.Random) -> list[_Unit]:
    """One merge of the run's streams, each in its own order, clocks kept in order."""
    streams: dict[str | None, list[int]] = {}
    for i, unit in enumerate(run):
        streams.setdefault(unit[0], []).append(i)
    queues = list(streams.values())
    placed = [False] * len(run)
    out: list[_Unit] = []
    while any(queues):
        ready = [q for q in queues if q and _free(run, placed, q[0])]
        # variant 1: the stream that printed last arrives first wherever it may
        q = ready[-1] if variant == 1 else rng.choices(ready, weights=[len(q) for q in ready])[0]
        placed[q[0]] = True
        out.append(run[q.pop(0)])
    return out


def interleaved(text: str, file: str, variant: int) -> str | None:
    """The text with its streams re-merged (seeded by the file name and variant), or None when
    no merge but the text's own is possible."""
    units = _units(text)
    if units is None:
        return None
    runs = _runs(units)
    if all(len({u[0] for u in run}) < 2 for run in runs):
        return None
    original = "\n".join(text.splitlines())
    for attempt in range(8):
        rng = random.Random(zlib.crc32(f"{file}:{variant}:{attempt}".encode()))
        out = [ln for run in runs for u in _merged(run, variant, rng) for ln in u[1]]
        if "\n".join(out) != original:
            return "\n".join(out) + ("\n" if text.endswith("\n") else "")
    return None


CHECKED = [
    c for c in TRAINING if c["file"] not in KNOWN_TRAINING_MISSES and c["file"] not in OPEN_ROUNDS
]


QUALIFYING = [
    (c["file"], v)
    for c in CHECKED
    for v in VARIANTS
    if interleaved(case_text(c["file"]), c["file"], v) is not None
]


@pytest.mark.parametrize(
    ("file", "variant"),
    [
        pytest.param(
            f,
            v,
            id=f"{f}-{v}",
            marks=[pytest.mark.skip(reason=SKIPPED[(f, v)])] if (f, v) in SKIPPED else [],
        )
        for f, v in QUALIFYING
    ],
)
def test_the_verdict_holds_whichever_stream_arrives_first(file: str, variant: int) -> None:
    merged = interleaved(case_text(file), file, variant)
    assert merged is not None
    got = explain_text(merged)
    category, blame, node = original_verdict(file)
    want = (category, blame, (node or "").lower())
    assert (got.category, got.blame, (got.node or "").lower()) == want


@pytest.mark.parametrize("file", sorted({f for f, _ in QUALIFYING}))
def test_a_merge_keeps_every_line_and_each_streams_order(file: str) -> None:
    # the same lines, each stream's in its own order, the unnamed ones between the same
    # neighbours' streams (booleans only: a failing assert must not print the text)
    text = case_text(file)
    units = _units(text)
    assert units is not None
    for variant in VARIANTS:
        merged = interleaved(text, file, variant)
        if merged is None:
            continue
        assert sorted(merged.splitlines()) == sorted(text.splitlines()), variant
        again = _units(merged)
        assert again is not None, variant
        for key in {k for k, _ in units}:
            assert [u[1] for u in again if u[0] == key] == [u[1] for u in units if u[0] == key]


def test_merges_keep_stream_order_unnamed_lines_and_clocks() -> None:
    text = "\n".join(
        [
            "header",
            *(f"{r}: step {i} of rank {r} done fine" for i in range(3) for r in (0, 1)),
            "srun: error: task 1 exited",
            "  more",
            "0: after",
        ]
    )
    merged = interleaved(text, "x.txt", 1)
    assert merged is not None
    lines = merged.splitlines()
    assert lines[0] == "header" and lines[7:] == [
        "srun: error: task 1 exited",
        "  more",
        "0: after",
    ]
    assert [ln for ln in lines if ln.startswith("1:")] == [
        f"1: step {i} of rank 1 done fine" for i in range(3)
    ]
    assert lines[1].startswith("1:")  # the stream that printed last arrives first
    clocked = "0: 10:00:01 a thing\n1: 10:00:01 b thing\n0: 10:00:02 c thing\n1: 10:00:03 d"
    assert interleaved(clocked, "y.txt", 1) == "1: 10:00:01 b thing\n0: 10:00:01 a thing\n" + (
        "0: 10:00:02 c thing\n1: 10:00:03 d"
    )
    # a line without a clock may arrive any time between its own stream's neighbours
    loose = "1: 10:00:01 b thing\n0: no clock here\n0: 10:00:02 a thing"
    assert interleaved(loose, "w.txt", 1) == "0: no clock here\n1: 10:00:01 b thing\n" + (
        "0: 10:00:02 a thing"
    )
    assert interleaved("one stream\n0: only", "z.txt", 0) is None


def test_delivery_names_each_lines_stream_without_its_clock() -> None:
    srun = undelivered(" 0: a line of task zero\n12: a line of task twelve\nplain")
    assert srun.streams == ["0:", "12:", None]
    mpi = undelivered(
        "Mon Mar  4 05:06:07 2025[1,3]<stderr>:x\nTue Mar  5 05:06:08 2025[1,3]<stderr>:y"
    )
    assert mpi.streams == ["[1,3]<stderr>:", "[1,3]<stderr>:"]
    nested = undelivered("[pod/p-0/c] [default1]:x\n[pod/p-0/c] [default0]:y")
    assert nested.streams == ["[pod/p-0/c] [default1]:", "[pod/p-0/c] [default0]:"]
    nccl = NCCL_PREFIX.match("gpu-07:4711:4790 [3] NCCL INFO Init COMPLETE")
    assert nccl is not None and (nccl["h"], nccl["pid"]) == ("gpu-07", "4711")
