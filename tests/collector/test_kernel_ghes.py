"""Firmware-first (APEI/GHES) hardware error records and the other uncorrected-memory lines the
agent reads (collector/parse/kernel_ghes.py, kernel_node.py): one event a record, whose lines
share its "{N}" number; recoverable or fatal is a machine check, a corrected memory record
naming its DIMM one CE report of that module (summed as EDAC CE lines are), anything else a
report with no verdict alone.

Lines follow torvalds/linux's formats with made-up values: drivers/acpi/apei/ghes.c
__ghes_print_estatus, drivers/firmware/efi/cper.c cper_estatus_print / cper_print_mem /
cper_mem_err_location (current "node:%d ", older "node: %d ", oldest one field a line) /
cper_dimm_err_location, arch/x86/kernel/cpu/mce/core.c __print_mce before pr_fmt "mce: " and
kill_me_maybe, mm/memory-failure.c action_result."""

from __future__ import annotations

from collector.parse.kernel import KernelLogParser, parse_kernel_line, parse_kernel_text
from collector.parse.kernel_ghes import read_record
from correlator.explain.readers import read_events
from correlator.explain.readers_edac import edac_ce_storms
from correlator.rules import classify_event
from timeline.models import Event, Severity

CHECK = "the host reported a hardware (machine check / memory) error"


def _record(n: int, severity: str, location: list[str], *, dimm: str | None = None) -> list[str]:
    bodies = [
        "Hardware error from APEI Generic Hardware Error Source: 3",
        f"event severity: {severity}",
        f" Error 0, type: {severity}",
        "  section_type: memory error",
        "   error_status: Storage error in DRAM memory (0x0000000000000400)",
        "  physical_address: 0x00000008a398a400",
        *[f"  {loc}" for loc in location],
        "  error_type: 3, multi-bit ECC" if severity != "corrected" else
        "  error_type: 2, single-bit ECC",
    ]  # fmt: skip
    if dimm:
        bodies.append(f"  DIMM location: {dimm} ")
    return [f"[  183.6459{i:02d}] {{{n}}}[Hardware Error]: {b}" for i, b in enumerate(bodies)]


def _verdict(ev: Event) -> str | None:
    v = classify_event(ev)
    return v.summary if v is not None else None


def test_a_recoverable_memory_record_is_one_machine_check_event_with_its_fields() -> None:
    lines = _record(1, "recoverable", ["node:1 card:0 module:3 rank:0 bank:2 row:5238 column:856 "],
                    dimm="NODE 1 CPU1_DIMM_C1")  # fmt: skip
    [ev] = parse_kernel_text("\n".join(lines), node="gpu-01")
    assert ev.raw == "\n".join(lines) and ev.severity is Severity.ERROR
    p = ev.payload
    assert p["fault"] == "machine_check" and p["ghes_severity"] == "recoverable"
    assert p["source_id"] == 3 and p["sections"] == [{"severity": "recoverable", "type": "memory"}]
    assert p["physical_address"] == "0x00000008a398a400"
    assert p["location"] == {"node": 1, "card": 0, "module": 3, "rank": 0, "bank": 2,
                             "row": 5238, "column": 856}  # fmt: skip
    assert p["memory_error_type"] == "multi-bit ECC" and p["module"] == "APEI NODE 1 CPU1_DIMM_C1"
    assert "unread" not in p
    assert _verdict(ev) == CHECK


def test_a_fatal_record_is_a_critical_machine_check() -> None:
    [ev] = parse_kernel_text("\n".join(_record(7, "fatal", ["node:0"])))
    assert ev.severity is Severity.CRITICAL and ev.payload["fault"] == "machine_check"
    assert "module" not in ev.payload  # node alone names no DIMM
    assert _verdict(ev) == CHECK


def test_a_corrected_record_naming_its_dimm_is_one_ce_report_of_that_module() -> None:
    [ev] = parse_kernel_text("\n".join(_record(2, "corrected", ["node: 0 card: 1 module: 0 "])))
    assert ev.severity is Severity.WARNING and _verdict(ev) is None
    assert ev.payload["fault"] == "edac_ce" and ev.payload["ce_count"] == 1
    assert ev.payload["module"] == "APEI node:0 card:1 module:0"


def test_the_oldest_one_field_a_line_location_names_the_same_module() -> None:
    [ev] = parse_kernel_text(
        "\n".join(_record(2, "corrected", ["node: 0", "card: 1", "module: 0"]))
    )
    assert ev.payload["module"] == "APEI node:0 card:1 module:0"


def test_a_dmi_handle_without_a_dimm_name_still_keys_the_module() -> None:
    rec = _record(4, "corrected", [], dimm="not present. DMI handle: 0x0023")
    [ev] = parse_kernel_text("\n".join(rec))
    assert ev.payload["module"] == "APEI DMI handle: 0x0023"


def test_a_corrected_record_naming_no_dimm_stays_a_report() -> None:
    [ev] = parse_kernel_text("\n".join(_record(5, "corrected", ["node:0 rank:1 "])))
    assert ev.payload["fault"] == "hardware_error_report" and "ce_count" not in ev.payload
    assert ev.severity is Severity.INFO and _verdict(ev) is None


def test_a_lone_corrected_severity_line_means_nothing() -> None:
    ev = parse_kernel_line("{1}[Hardware Error]: event severity: corrected", node="gpu-01")
    assert ev is not None and ev.payload["fault"] == "hardware_error_report"
    assert _verdict(ev) is None


def test_two_records_interleaved_with_other_lines_are_two_events() -> None:
    first = _record(1, "corrected", ["node:0 card:0 module:0 "])
    second = _record(2, "recoverable", ["node:0 card:0 module:0 "])
    other = "[  183.7] mce: Uncorrected hardware memory error in user-access at 8a398a400"
    text = "\n".join([*first[:3], other, *first[3:], *second])
    evs = parse_kernel_text(text)
    by_raw = {e.raw: e.payload["fault"] for e in evs}
    assert by_raw == {"\n".join(first): "edac_ce", "\n".join(second): "machine_check",
                      other: "machine_check"}  # fmt: skip


def test_malformed_record_lines_never_crash_and_are_counted() -> None:
    junk = [
        "{9}[Hardware Error]: \x00garbage ::: 0x",
        "{9}[Hardware Error]: node:abc module:",
        "{9}[Hardware Error]:",
        "{99999999999}[Hardware Error]: event severity: fatal",
    ]
    evs = parse_kernel_text("\n".join(junk))
    assert evs[0].payload["unread"] == 2 and evs[0].payload["fault"] == "hardware_error_report"
    assert read_record(["section_type: memory error", "node:1"])["location"] == {"node": 1}


def test_streaming_holds_a_record_until_it_is_complete() -> None:
    parser = KernelLogParser(node="gpu-01", emit_first=True)  # as the agent streams kmsg
    lines = _record(3, "fatal", ["node:0 card:0 module:1 "])
    held = [ev for i, line in enumerate(lines) for ev in parser.feed(line, ts=1000.0, seq=i)]
    assert held == [] and parser.held_min_seq() == 0
    [ev] = parser.tick(1010.0)
    assert ev.payload["fault"] == "machine_check" and ev.ts == 1000.0 and ev.payload["seq"] == 0


def test_machine_check_lines_without_the_mce_prefix_and_poisoned_pages() -> None:
    old = parse_kernel_line(
        "[Hardware Error]: CPU 2: Machine Check Exception: 5 Bank 4: b200000000070f0f"
    )
    user = parse_kernel_line("mce: Uncorrected hardware memory error in user-access at 8a398a400")
    page = parse_kernel_line(
        "Memory failure: 0x8a398a: recovery action for dirty LRU page: Recovered"
    )
    assert old is not None and user is not None and page is not None
    assert old.payload["fault"] == user.payload["fault"] == "machine_check"
    want = {"fault": "memory_failure", "pfn": "0x8a398a", "page_type": "dirty LRU page",
            "result": "Recovered"}  # fmt: skip
    assert want.items() <= page.payload.items()
    assert _verdict(old) == _verdict(user) == _verdict(page) == CHECK
    assert parse_kernel_line("Memory failure: 0x8a398a: already hardware poisoned") is None


def test_explain_sums_corrected_records_of_one_dimm_and_reads_a_record_once() -> None:
    text = "\n".join(
        line.replace("[  183.", f"[  {1000 + 60 * i}.")
        for i in range(10)
        for line in _record(i + 1, "corrected", ["node:0 card:0 module:2 "])
    )
    evs = read_events(text)
    assert all(e.payload.get("fault") == "edac_ce" for e in evs)  # one event a record or flood
    assert sum(e.count for e in evs) == 10
    [storm] = edac_ce_storms(evs)
    assert storm.message.startswith(
        "EDAC corrected memory errors: 10 on APEI node:0 card:0 module:2"
    )
    fatal = read_events("\n".join(_record(1, "fatal", ["node:0 card:0 module:2 "])))
    assert [_verdict(e) for e in fatal] == [CHECK]
