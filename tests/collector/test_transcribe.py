"""A log copied through a web page, issue tracker, chat or word processor is read as printed:
each transcription artifact is folded for matching, legitimate log text is left as it is, and a
hostile line costs time in proportion to its length."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from collector.parse.joblog import JobLogParser, parse_job_line, parse_job_text
from collector.parse.kernel import parse_kernel_line
from collector.parse.transcribe import transcribed
from correlator.explain import explain_text
from correlator.rules import classify_text


@pytest.mark.parametrize(
    ("copied", "printed"),
    [
        ("it\u2019s \u2018x\u2019 \u201cy\u201d \u201ez\u201c", 'it\'s \'x\' "y" "z"'),
        ("\u201aa\u201b b\u2032 c\u2033 d\u00b4", "'a' b' c\" d'"),
        ("peer \u2013 rank \u2014 3 \u2212 1 \u2010 2 \u2011 4", "peer - rank - 3 - 1 - 2 - 4"),
        ("waiting\u2026", "waiting..."),
        ("a\u00a0b\u2009c\u202fd\u3000e\u2002f", "a b c d e f"),
        ("CU\u200bDA\u200c er\u200dror\ufeff\u2060\u200e\u200f", "CUDA error"),
        ("un\u00adhandled", "unhandled"),
        ("\ufeffRuntimeError: boom", "RuntimeError: boom"),
    ],
)
def test_typographic_characters_fold_to_the_ascii_they_replace(copied: str, printed: str) -> None:
    assert transcribed(copied) == printed


def test_full_width_ascii_forms_fold_as_nfkc_folds_that_block() -> None:
    assert transcribed("错误信息\uff1a\uff08\uff11\uff09\uff21\uff5a\uff01") == "错误信息:(1)Az!"
    wide = "".join(chr(ord(c) + 0xFEE0) for c in "gpu-node-07")  # as an IME types it
    assert transcribed(wide) == "gpu-node-07"


@pytest.mark.parametrize(
    "kept",
    [
        "speed 10 m\u00b2/s, 5 \u00b5s, 40 \u2103, \ufb01le, \u00bd, \u2460, x\u00b2",  # NFKC would
        "\u53c2\u6570\u9519\u8bef\u3002\u3001",  # CJK text and its own full stop and comma
        "\u00ab guillemets \u00bb and caf\u00e9",
    ],
)
def test_other_unicode_is_not_normalised(kept: str) -> None:
    assert transcribed(kept) == kept


@pytest.mark.parametrize(
    ("scraped", "printed"),
    [
        (
            "Assertion `t &gt;= 0 &amp;&amp; t &lt; n` failed.",
            "Assertion `t >= 0 && t < n` failed.",
        ),
        ("file &quot;a.py&quot;, it&#39;s &#x27;x&#x27;", "file \"a.py\", it's 'x'"),
        ("gpu-01:&nbsp;error", "gpu-01: error"),
        ("&rsquo;x&rsquo; &#8212; y", "'x' - y"),  # an entity naming a smart quote or a dash
    ],
)
def test_html_character_references_are_unescaped(scraped: str, printed: str) -> None:
    assert transcribed(scraped) == printed


@pytest.mark.parametrize(
    "kept",
    [
        "cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)",
        "cmd && echo ok & wait; a&b",
        "int &x; &foo_bar; &#; &#x; &unknownentityname;",
    ],
)
def test_ampersands_that_are_no_entity_are_kept(kept: str) -> None:
    assert transcribed(kept) == kept


def test_an_entity_is_unescaped_one_level_only() -> None:
    assert transcribed("a &amp;lt; b") == "a &lt; b"


@pytest.mark.parametrize(
    ("pasted", "printed"),
    [
        (
            "_Check_ failed: result == ncclSuccess (1 vs. 0)  unhandled cuda _error_",
            "Check failed: result == ncclSuccess (1 vs. 0)  unhandled cuda error",
        ),
        (
            "**Watchdog caught collective operation timeout:** WorkNCCL(SeqNum=1)",
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)",
        ),
        ("*CUDA error* here", "CUDA error here"),
        ("***bold italic*** and __two words__.", "bold italic and two words."),
        ("(**CUDA_ERROR_ILLEGAL_ADDRESS**)", "(CUDA_ERROR_ILLEGAL_ADDRESS)"),
        ("\"_quoted_\", 'x' _a_ _b_", "\"quoted\", 'x' a b"),
        ("\\_Check\\_ failed \\*x\\* \\[rank0\\]", "_Check_ failed *x* [rank0]"),
        ("`RuntimeError: CUDA error: out of memory`", "RuntimeError: CUDA error: out of memory"),
        (
            "  ```NCCL WARN Cuda failure 'out of memory'``` ",
            "  NCCL WARN Cuda failure 'out of memory' ",
        ),
    ],
)
def test_markdown_markup_of_pasted_issue_text_is_taken_off(pasted: str, printed: str) -> None:
    assert transcribed(pasted) == printed


@pytest.mark.parametrize(
    "legit",
    [
        "CUDA_ERROR_ILLEGAL_ADDRESS NCCL_DEBUG=INFO my_var_name _private_var_ snake_case_",
        'File "/usr/lib/python3/site-packages/torch/__init__.py", line 3, in __call__',
        '2026-11-28 12:00:01 ERROR [__main__] main failed; if __name__ == "__main__":',
        "__CUDACC__ __CUDA_ARCH__ __global__ void k()",
        "OpType=_ALLGATHER_BASE, _ZN2at6native18elementwise_kernel",
        "*** Process received signal ***",
        "*** Check failure stack trace: ***",
        "*** Error in `python': double free or corruption (out): 0x00007f ***",
        "def f(*args, **kwargs): return g(*a, **kw)",
        "char **argv; (void *)0; int *p = *q;",
        "ls /data/*.pt /tmp/* **/*.py a*b*c 2 * 3 * 4 file_*.txt",
        "'*' or '*'; x = '_'; y = \"_\"",
        "* item one",
        "Assertion `srcIndex < srcSelectDimSize` failed.",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda)`",
        "C:\\\\Users\\\\me \\n \\t \\d+ \\\\_",
        "``` ```",
        "_ __ ___ * ** ***",
    ],
)
def test_legitimate_log_text_is_left_intact(legit: str) -> None:
    assert transcribed(legit) == legit


def test_plain_ascii_comes_back_as_the_same_object() -> None:
    line = "[rank3]: step 1234 loss=2.31 lr=1e-05"
    assert transcribed(line) is line


def _cost(make: Callable[[int], str], n: int) -> float:
    text = make(n)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        transcribed(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize(
    "make",
    [
        lambda n: " _a" * (n // 3),
        lambda n: " *a" * (n // 3),
        lambda n: " **a" * (n // 4),
        lambda n: " __ab" * (n // 5),
        lambda n: " _" + "a" * n,  # an opening marker and no closing one
        lambda n: "&" + "a" * n,
        lambda n: "&#" * (n // 2),
        lambda n: "\\" * n,
        lambda n: "`" + "a" * n,
        lambda n: "\u201c\u00a0\uff1a" * (n // 3),
    ],
    ids=[
        "unders",
        "stars",
        "bold",
        "dunders",
        "open",
        "amp",
        "numeric",
        "backslash",
        "tick",
        "unicode",
    ],
)
def test_a_hostile_line_costs_time_in_proportion_to_its_length(
    make: Callable[[int], str],
) -> None:
    # a relative check: 8 times the text may cost about 8 times the time, never 64 (quadratic)
    small, large = _cost(make, 1 << 17), _cost(make, 1 << 20)
    assert large < 24 * max(small, 1e-4)


# --- both paths read the transcribed line alike -------------------------------------------------

ORIGINAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
COPIES = [
    "RuntimeError: CUDA\u00a0error: an illegal memory access was encountered",
    "RuntimeError\uff1a CUDA error\uff1a an illegal memory access was encountered",
    "RuntimeError: CUDA error: an _illegal memory access_ was encountered",
    "RuntimeError: CUDA error: an illegal&nbsp;memory access was encountered",
    "RuntimeError: CUDA error: an ill\u00adegal memory ac\u200bcess was encountered",
    "`RuntimeError: CUDA error: an illegal memory access was encountered`",
]


@pytest.mark.parametrize("copy", COPIES)
def test_the_job_log_parser_reads_a_copied_line_as_the_printed_one(copy: str) -> None:
    plain, copied = parse_job_line(ORIGINAL), parse_job_line(copy)
    assert plain is not None and copied is not None
    assert (copied.kind, copied.payload.get("error")) == (plain.kind, plain.payload.get("error"))
    assert copied.raw == copy  # evidence stays the line as it came


def test_the_streaming_parser_keeps_the_raw_line_and_matches_the_folded_one() -> None:
    line = (
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory\u2026 Tried to allocate 2.00\u00a0GiB"
    )
    parser = JobLogParser()
    events = parser.feed(line, ts=1.0) + parser.flush()
    assert [e.raw for e in events] == [line]
    assert events[0].payload.get("log_rank") == 0


def test_the_kernel_parser_reads_a_scraped_xid_line() -> None:
    line = (
        "[ 12.5] NVRM:&nbsp;Xid (PCI:0000:3b:00): 79, pid=&#39;&lt;unknown&gt;&#39;, "
        "GPU has fallen off the bus."
    )
    event = parse_kernel_line(line)
    assert event is not None and event.code == 79 and event.raw == line


def test_the_correlator_rules_read_a_copied_line_as_the_printed_one() -> None:
    printed = "_Check_ failed: result == ncclSuccess (1 vs. 0)  unhandled cuda _error_"
    verdict = classify_text(printed)
    assert verdict is not None and verdict == classify_text(transcribed(printed))


def test_explain_and_the_agent_give_one_verdict_on_a_transcribed_line() -> None:
    from correlator.explain.reasoning import conclude, findings

    copy = "**Check failed: result == ncclSuccess (1 vs. 0)  unhandled cuda _error_**"
    explained = explain_text(copy)
    agent = conclude(findings(parse_job_text(copy, suspects=True)))
    assert agent is not None
    assert (explained.category, explained.blame) == ("user_code", "job")
    assert (agent.verdict.category, agent.verdict.blame) == ("user_code", "job")
    assert explained.evidence == [copy]  # quoted as the text has it
