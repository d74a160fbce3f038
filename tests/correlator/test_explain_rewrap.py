"""A wrapped paste (a terminal's hard wrap at W columns, an editor's word wrap) is read again with
its lines joined, when the text as it came shows nothing explain recognises. Made-up values."""

from __future__ import annotations

import textwrap

from correlator.explain import explain_text
from correlator.explain.rewrap import MIN_WIDTH, rewrapped

WARN = (
    "gpu-node-17:2841:2910 [3] enqueue.cc:1025 NCCL WARN Cuda failure 'out of memory' while "
    "launching the ring allreduce kernel for comm 0x55d1e0c0 rank 3 nranks 16"
)
OOM = (
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has "
    "a total capacity of 79.10 GiB of which 1.13 GiB is free. Including non-PyTorch memory, this "
    "process has 77.95 GiB memory in use."
)


def _hard(text: str, width: int) -> str:
    out = []
    for line in text.splitlines():
        out += [line[i : i + width] for i in range(0, len(line), width)] or [""]
    return "\n".join(out)


def test_a_terminals_hard_wrap_is_joined_and_quoted_as_pasted() -> None:
    pasted = _hard(f"Traceback (most recent call last):\n{WARN}\n{OOM}", 64)
    assert explain_text(pasted.replace("\n", " ")).category is not None  # (sanity: it reads)
    got = explain_text(pasted)
    assert (got.category, got.blame, got.node) == ("oom_gpu", "job", "gpu-node-17")
    assert got.evidence and all(line in pasted.splitlines() for line in got.evidence)


def test_an_editors_word_wrap_is_joined_with_a_space() -> None:
    line = (
        "RuntimeError: CUDA error: an illegal memory access was encountered in the attention kernel"
    )
    pasted = "\n".join(
        textwrap.wrap(f"{line} of layer 17 during the backward pass of step 4000", 70)
    )
    assert explain_text(pasted).category == "user_code"
    joined = rewrapped(pasted, hard=False)
    assert joined is not None and "memory access was encountered" in joined[0]


def test_lines_shorter_than_any_wrap_are_never_joined() -> None:
    short = "x" * (MIN_WIDTH - 1)
    assert rewrapped(f"{short}\n{short}\nCUDA error: out\nof memory", hard=False) is None


def test_a_line_after_a_short_one_starts_a_line_of_its_own() -> None:
    width = 70
    text = "\n".join(["a" * width, "b" * 10, "c" * width, "d" * 5, "e" * 12])
    got = rewrapped(text, hard=True)
    assert got is not None
    lines, pieces = got
    assert lines.splitlines() == ["a" * width + "b" * 10, "c" * width + "d" * 5, "e" * 12]
    assert pieces["c" * width + "d" * 5] == "c" * width + "\n" + "d" * 5


def test_a_text_read_as_it_came_is_not_read_again_joined() -> None:
    # joined, the second line would carry the first's meaning away; as pasted it reads alone
    first = "srun: error: gpu-node-17: task 3: Out Of Memory".ljust(72, ".")
    second = "x" * 72
    got = explain_text(f"{first}\n{second}\n")
    assert (got.category, got.node) == ("oom_host", "gpu-node-17")
    assert got.evidence == [first]


def test_one_long_line_cut_once_is_read_as_a_terminal_cut_before_a_word_wrap() -> None:
    # one cut line cannot show which wrap it was: a mid-word cut is tried first, then a space
    line = (
        "slurmstepd: error: execve(): /var/spool/slurmd/job41235/slurm_script: No such file or "
        "directory"
    )
    got = explain_text(_hard(line, 64))
    assert (got.category, got.blame) == ("node", "node")
    assert got.evidence == _hard(line, 64).splitlines()


def test_a_cut_launcher_or_socket_line_is_read_whole() -> None:
    failed = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
        "(pid: 41236) of binary: /usr/bin/python3"
    )
    refused = (
        "[E socket.cpp:922] [c10d] The client socket has failed to connect to "
        "[trainer-0.trainer.default.svc]:29500 (errno: 104 - Connection reset by peer)."
    )
    assert explain_text(_hard(failed, 64)).category == "user_code"
    got = explain_text(_hard(refused, 64))
    assert (got.category, got.node) == ("interconnect", "trainer-0.trainer.default.svc")
