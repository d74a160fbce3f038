"""A host's EDAC corrected-error lines: a lone report stays unblamed, one module's errors that
reach mcelog's per-DIMM trigger (10 in 24 h) blame the node, and mcelog's own threshold
messages do too. Every text is built from the emitters' formats (drivers/edac/edac_mc.c,
andikleen/mcelog memdb.c and page.c, cited in correlator/explain/readers_edac.py and
correlator/rules/emitters/linux_kernel.json) with made-up values, never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_MCE = (
    "Mar  3 02:10:00 {host} kernel: [100200.000001] mce: [Hardware Error]: "
    "Machine check events logged"
)
# an old-style edac_ce_error line with no prefix of its own but the kernel's uptime stamp
_DIMM_A1 = (
    "EDAC MC0: 6 CE error on DIMM_A1 (channel:0 slot:0 page:0x0 offset:0x0 grain:8 syndrome:0x0)"
)


def _ce(host: str, second: int, count: int, label: str = "CPU_SrcID#1_MC#0_Chan#3_DIMM#0") -> str:
    """A v5.10+ edac_ce_error line under syslog's prefix, `second` seconds after 02:10:00."""
    stamp = f"02:{10 + second // 60:02d}:{second % 60:02d}"
    return (
        f"Mar  3 {stamp} {host} kernel: [{100200 + second}.000200] EDAC MC1: {count} CE "
        f"memory read error on {label} (channel:3 slot:0 page:0x1f2e3d offset:0x0 grain:32 "
        "syndrome:0x0 - err_code:0x0000:0x009f socket:1 imc:0 rank:0 bg:2 ba:1 row:0x1a4 "
        "col:0x2c0)"
    )


def test_one_modules_ce_lines_reaching_ten_blame_the_node_that_logged_them() -> None:
    text = "\n".join(
        [_MCE.format(host="gpu-r07"), *(_ce("gpu-r07", s, 2) for s in range(0, 25, 5))]
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-r07")
    assert "DIMM" in got.explanation
    # the evidence quotes the module's own lines, not the machine-check notice alone
    assert any("EDAC MC1: 2 CE" in line for line in got.evidence)


def test_ce_lines_under_the_threshold_stay_an_unblamed_report() -> None:
    text = "\n".join(
        [_MCE.format(host="gpu-r07"), *(_ce("gpu-r07", s, 1) for s in range(0, 45, 5))]
    )  # nine corrected errors
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "unknown")


def test_ce_counts_of_different_modules_are_not_added_together() -> None:
    lines = [_ce("gpu-r07", s, 3, label=f"CPU_SrcID#0_MC#0_Chan#{s}_DIMM#0") for s in range(4)]
    got = explain_text("\n".join([_MCE.format(host="gpu-r07"), *lines]))
    assert got.blame == "unknown"


def test_the_same_module_label_on_two_hosts_is_two_modules() -> None:
    lines = [_ce(host, s, 3) for s in range(0, 20, 10) for host in ("gpu-a1", "gpu-a2")]
    got = explain_text("\n".join(lines))  # six on each host
    assert got.blame != "node"


def test_ce_lines_spread_over_more_than_a_day_do_not_reach_the_trigger() -> None:
    early, late = f"[  1000.000001] {_DIMM_A1}", f"[ 90000.000001] {_DIMM_A1}"
    assert explain_text(f"{early}\n{late}").blame != "node"
    soon = late.replace(" 90000.", " 50000.")
    assert explain_text(f"{early}\n{soon}").blame == "node"


def test_ce_lines_without_any_clock_are_not_counted_as_one_run() -> None:
    assert explain_text(f"{_DIMM_A1}\n{_DIMM_A1}\n{_DIMM_A1}").blame != "node"


@pytest.mark.parametrize("prefix", ["", "[ 5120.441002] ", "Mar  3 02:10:09 gpu-r07 kernel: "])
def test_one_report_of_many_corrected_errors_reaches_the_trigger_alone(prefix: str) -> None:
    line = _DIMM_A1.replace(" 6 CE ", " 417 CE ")
    got = explain_text(prefix + line)
    assert (got.category, got.blame) == ("node", "node")


def test_pre_3_5_kernels_one_error_a_line_are_counted_by_row_and_channel() -> None:
    line = (
        "[{t}.000001] EDAC MC0: CE page 0xf075b2, offset 0x410, grain 0, syndrome 0xa082, "
        'row 6, channel 0, label "": amd64_edac'
    )
    ten = "\n".join(line.format(t=200 + i) for i in range(10))
    assert (explain_text(ten).category, explain_text(ten).blame) == ("node", "node")
    other_row = "\n".join(line.format(t=200 + i).replace("row 6", f"row {i}") for i in range(10))
    assert explain_text(other_row).blame != "node"


@pytest.mark.parametrize(
    "message",
    [
        "Corrected DIMM memory error count exceeded threshold: 10 in 24h",
        "Uncorrected DIMM memory error count exceeded threshold: 1 in 24h",
        "Corrected Socket memory error count exceeded threshold: 100 in 24h",
        "Fallback Socket memory error count 41 exceeded threshold: 101 in 24h",
        "Corrected memory errors on page 1f2e3d000 exceed threshold 10 in 24h",
    ],
)
def test_mcelogs_threshold_messages_blame_the_node(message: str) -> None:
    text = (
        f"Mar  3 02:11:07 gpu-r09 mcelog: {message}\n"
        "Mar  3 02:11:07 gpu-r09 mcelog: Location SOCKET:1 CHANNEL:3 DIMM:0 [A7]\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-r09")
