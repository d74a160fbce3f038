"""The kernel's EDAC corrected-error lines (collector/parse/kernel_edac.py): one warning event a
line naming the memory module and its CE count, no verdict alone; one module's lines that reach
mcelog's per-DIMM trigger (10 in 24 h) together are a node fault, as `explain` reads a text.

Lines follow torvalds/linux drivers/edac/edac_mc.c's formats (edac_ce_error since v5.10 and
before, edac_mc_handle_ce before 3.5) with made-up values."""

from __future__ import annotations

from collector.parse.kernel import parse_kernel_line, parse_kernel_text
from collector.parse.kernel_edac import busiest_day, ce_fields, most_in_a_day
from correlator.explain.readers_edac import edac_ce_storms
from correlator.explain.reasoning import conclude, findings
from correlator.rules import classify_event
from timeline.models import EventKind, Severity

NEW = (
    "EDAC MC1: {n} CE memory read error on CPU_SrcID#1_MC#0_Chan#2_DIMM#0 (channel:2 slot:0 "
    "page:0x4f1a2 offset:0x340 grain:32 syndrome:0x0 - err_code:0x0000:0x009f socket:1 imc:0 "
    "rank:1 bg:2 ba:1 row:0x3c1 col:0x68)"
)
OLDER = (
    "EDAC MC0: {n} CE error on DIMM_B2 (channel:1 slot:1 page:0x0 offset:0x0 grain:8 syndrome:0x0)"
)
PRE_3_5 = (
    "EDAC MC0: CE page 0x1a2b3, offset 0x4c0, grain 128, syndrome 0x9e, row 3, channel 1, "
    'label "": i5000_edac'
)


def _syslog(i: int, line: str, host: str = "gpu-node-07") -> str:
    return f"Mar  3 10:{i // 60:02d}:{i % 60:02d} {host} kernel: [ {1000 + i}.000123] {line}"


def test_a_ce_line_is_a_warning_naming_its_module_and_count() -> None:
    ev = parse_kernel_line(NEW.format(n=3), node="gpu-node-07")
    assert ev is not None and ev.kind is EventKind.OTHER and ev.severity is Severity.WARNING
    assert ev.payload["fault"] == "edac_ce" and ev.payload["ce_count"] == 3
    assert ev.payload["mc"] == "MC1" and ev.payload["label"] == "CPU_SrcID#1_MC#0_Chan#2_DIMM#0"
    assert ev.payload["module"] == "MC1 CPU_SrcID#1_MC#0_Chan#2_DIMM#0"


def test_the_pre_5_10_layout_names_its_label_too() -> None:
    ev = parse_kernel_line(OLDER.format(n=2))
    assert ev is not None and ev.payload["module"] == "MC0 DIMM_B2" and ev.payload["ce_count"] == 2


def test_the_pre_3_5_layout_names_row_and_channel_one_error_a_line() -> None:
    ev = parse_kernel_line(PRE_3_5)
    assert ev is not None and ev.payload["fault"] == "edac_ce"
    assert ev.payload["row"] == 3 and ev.payload["channel"] == 1 and ev.payload["ce_count"] == 1
    assert ev.payload["module"] == "MC0 row 3 channel 1"


def test_a_lone_ce_line_has_no_verdict() -> None:
    for line in (NEW.format(n=1), OLDER.format(n=9), PRE_3_5):
        ev = parse_kernel_line(line)
        assert ev is not None and classify_event(ev) is None


def test_an_uncorrected_error_stays_a_ue_not_a_ce() -> None:
    ev = parse_kernel_line("EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0")
    assert ev is not None and ev.payload["fault"] == "edac_ue" and ce_fields(ev.message) is None


def test_an_uncorrected_error_names_its_module_as_that_module_s_ce_lines_do() -> None:
    ce = parse_kernel_line(NEW.format(n=1))
    ue = parse_kernel_line(NEW.format(n=1).replace(" CE ", " UE ").replace(" syndrome:0x0", ""))
    older = parse_kernel_line(OLDER.format(n=1).replace(" CE ", " UE "))
    assert ce is not None and ue is not None and older is not None
    assert ue.payload["fault"] == "edac_ue" and ue.payload["ue_count"] == 1
    assert ue.payload["module"] == ce.payload["module"]
    assert older.payload["module"] == "MC0 DIMM_B2"


def test_a_pre_3_5_uncorrected_error_names_no_one_module() -> None:
    # edac_mc_handle_ue printed a row and the labels of all its channels
    ev = parse_kernel_line(
        'EDAC MC0: UE page 0x1a2b3, offset 0x4c0, grain 128, row 3, labels ":": i5000_edac'
    )
    assert ev is not None and ev.payload["fault"] == "edac_ue" and "module" not in ev.payload


def test_nine_corrected_errors_of_one_module_in_a_day_stay_a_report() -> None:
    text = "\n".join(_syslog(i, NEW.format(n=n)) for i, n in enumerate((3, 3, 2, 1)))
    events = parse_kernel_text(text, year=2025)
    assert edac_ce_storms(events) == []
    assert conclude(findings(events)) is None


def test_ten_corrected_errors_of_one_module_in_a_day_blame_the_node() -> None:
    text = "\n".join(_syslog(i, NEW.format(n=n)) for i, n in enumerate((4, 2, 1, 3)))
    events = parse_kernel_text(text, year=2025)
    storms = edac_ce_storms(events)
    assert len(storms) == 1 and storms[0].node == "gpu-node-07"
    conclusion = conclude(findings(events))
    assert conclusion is not None
    assert (conclusion.verdict.category, conclusion.verdict.blame) == ("node", "node")


def test_ten_pre_3_5_lines_of_one_row_and_channel_reach_the_trigger() -> None:
    text = "\n".join(_syslog(i, PRE_3_5) for i in range(10))
    events = parse_kernel_text(text, year=2025)
    assert sum(e.count for e in events if e.payload.get("fault") == "edac_ce") == 10
    assert len(edac_ce_storms(events)) == 1


def test_two_modules_are_counted_apart() -> None:
    lines = [NEW.format(n=6), OLDER.format(n=6)]
    events = parse_kernel_text("\n".join(_syslog(i, ln) for i, ln in enumerate(lines)), year=2025)
    assert edac_ce_storms(events) == []


def test_errors_more_than_a_day_apart_are_not_summed() -> None:
    assert most_in_a_day([(0.0, 6), (86_400.0 + 1, 6)]) == (6, 0.0)
    assert most_in_a_day([(0.0, 6), (86_400.0, 4)]) == (10, 86_400.0)
    assert most_in_a_day([(None, 6), (None, 6)]) == (6, 0.0)


def test_the_busiest_day_is_the_window_of_reports_that_adds_up_to_the_most() -> None:
    reports = [(0.0, 4), (600.0, 6), (90_000.0, 1), (90_600.0, 2)]
    assert busiest_day(reports) == (10, 0, 1)
    assert busiest_day([(0.0, 5), (100.0, 5), (86_500.0, 5)]) == (10, 1, 2)  # widest on ties
    assert busiest_day([]) == (0, 0, 0)
