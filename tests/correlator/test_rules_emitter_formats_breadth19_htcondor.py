"""HTCondor hold reasons no rule covered before probe set nineteen (issue #11).

Formats, from its own source (htcondor/htcondor src/condor_utils/user_job_policy.cpp
@e81dc425cf): UserPolicy::AnalyzePolicy holds a job with "The job exceeded allowed job duration of
%s" (allowed_job_duration, hold code 46 JobDurationExceeded) or "The job exceeded allowed execute
duration of %s" (allowed_execute_duration, hold code 47 JobExecuteExceeded), the duration as
format_time_short prints it ("20:00:00", "3+00:00:00"); shown by the job event log's held event
("012 (<cluster>.000.000) <date> Job was held.", the reason, "Code 47 Subcode 0") and by
`condor_q -hold`'s HOLD_REASON column.

Verdicts by the label policy (tests/fixtures/corpus/README.md): the job's own time limit is
scheduler / job, as Slurm's time limit; the line names no host.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

POLICY = "htcondor/htcondor src/condor_utils/user_job_policy.cpp@e81dc425cf"

_HELD = "012 ({cluster}.000.000) {date} Job was held.\n\t"
_V = {
    "cluster": (2456301, 15872426, 123),
    "date": ("2022-05-27 10:37:20", "03/03 15:13:48"),
    "dur": ("20:00:00", "3+00:00:00", "1:30:00", "10+12:00:00"),
}
CONDOR = [
    Fmt(
        "condor-held-duration-exceeded",
        POLICY,
        "The job exceeded allowed {which} duration of {dur}\n{code}",
        {**_V, "which": ("execute", "job"), "code": ("\tCode 47 Subcode 0\n", "")},
        ("scheduler", "job"),
        prefixes=(_HELD, " {cluster}.0   lares   9/24 10:01  ", ""),
    ),
]


@pytest.mark.parametrize(("f", "text", "node"), params(CONDOR))
def test_each_htcondor_hold_reason_reads_as_its_source_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params(CONDOR))
def test_an_htcondor_duration_hold_names_no_host(f: Fmt, text: str, node: str | None) -> None:
    assert explain_text(text).node is None, text


BENIGN = (
    "001 (2456301.000.000) 2022-05-27 10:13:57 Job executing on host: <10.0.3.41:9618?addrs="
    "10.0.3.41-9618&alias=e327.chtc.wisc.edu>",
    "005 (2456301.000.000) 2022-05-27 10:37:20 Job terminated.\n\t(1) Normal termination "
    "(return value 0)",
)


@pytest.mark.parametrize("text", BENIGN)
def test_a_benign_htcondor_event_is_no_failure(text: str) -> None:
    got = explain_text(text)
    assert got.category is None and got.blame != "node", got.explanation
