"""Pure parsers for node-side text (kernel log, job logs, dcgm-exporter), for sources and `explain`.

Parsers turn text into timeline Events and decide nothing about meaning: kind, code, the
severity the text states, and parsed fields, with the verbatim line(s) kept in `raw`.
"""

from collector.parse.common import normalize_pci_bus_id
from collector.parse.dcgm import parse_dcgm_text
from collector.parse.joblog import JobLogParser, parse_job_line, parse_job_text
from collector.parse.kernel import KernelLogParser, parse_kernel_line, parse_kernel_text

__all__ = [
    "JobLogParser",
    "KernelLogParser",
    "normalize_pci_bus_id",
    "parse_dcgm_text",
    "parse_job_line",
    "parse_job_text",
    "parse_kernel_line",
    "parse_kernel_text",
]
