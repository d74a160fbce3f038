"""UCX's process prefix before a fatal signal names its host (openucx/ucx src/ucs/debug/log.c):
the four-field "[%s:%-5d:%d:%d] " of ucs_log_fatal_error and the three-field
UCS_LOG_PROC_DATA_FMT "[%s:%-5d:%d]", the pid left-aligned in five columns. Made-up values;
round forty-six's training miss 1007 has the three-field form."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

SEGV = "Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))"


@pytest.mark.parametrize(
    "prefix",
    ["[r104u33:4212 :0] ", "[r104u33:42125:0] ", "[r104u33:4212 :0:4212] "],
)
def test_a_ucx_fatal_prefix_names_the_host_of_the_crash(prefix: str) -> None:
    got = explain_text(f"{prefix}{SEGV}\n")
    assert (got.category, got.blame, got.node) == ("user_code", "job", "r104u33")


@pytest.mark.parametrize("prefix", ["[12:34:56] ", "[10:4212 :0] "])
def test_a_bracketed_clock_or_number_names_no_host(prefix: str) -> None:
    got = explain_text(f"{prefix}{SEGV}\n")
    assert (got.category, got.node) == ("user_code", None)
