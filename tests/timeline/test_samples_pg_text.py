"""How the PostgreSQL sample writer prints a column of values as text (COPY, array literals)."""

from __future__ import annotations

from timeline.samples_pg import _printed


def test_numbers_and_booleans_print_as_postgresql_reads_them_and_none_stays_none() -> None:
    assert _printed((93.0, 1.5e-7, None, 0, -3, 2.5e16)) == [
        "93.0",
        "1.5e-7",
        None,
        "0",
        "-3",
        "2.5e+16",
    ]
    assert _printed((True, False, None)) == ["true", "false", None]


def test_an_int_orjson_cannot_print_falls_back_to_str() -> None:
    assert _printed((2**70, None, 1)) == [str(2**70), None, "1"]


def test_a_non_finite_float_is_not_printed_as_null() -> None:
    assert _printed((float("nan"), None, 1.0)) == ["nan", None, "1.0"]
    assert _printed((float("inf"),)) == ["inf"]
