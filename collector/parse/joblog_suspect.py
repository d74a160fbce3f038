"""The last recognizer of a job log line: one that no other recognizer reads but that reports a
failure in words ("error", "failed", "killed", "refused", ...).

It is passed on as an OTHER event carrying its text, so the correlator's rules
(correlator/rules, the emitters' formats) read it as `fleetmedic explain` reads the same line in
a pasted log: the agent does not need a recognizer of its own for every emitter's message for a
live incident to agree with `explain`. Lines no rule reads cost a row and nothing else (the
correlator keeps only events with a verdict), and a parser passes on at most
`MAX_PER_WINDOW` of them per flood window, counting the rest.
"""

from __future__ import annotations

import re

from collector.parse.joblog_rules import JobMatch
from timeline.models import EventKind, Severity

# Words a failure report uses; whole words, so "terminal" and "timeline" stay quiet. Bounded
# alternation of literals: linear in the line's length. Matched on the lower-cased line: with
# re.IGNORECASE the same alternation costs ~40 us a line in Python's re, this ~7 us.
_FAILURE_WORDS = re.compile(
    r"\b(?:errors?|errno|fail(?:ed|ure|ing|s)?|fatal|killed|kill|abort(?:ed|ing)?|aborts|"
    r"exception|refused|timed out|timeout|unreachable|denied|oom|out of memory|segmentation|"
    r"core dumped|terminated|cancell?ed|evicted|panic|illegal|misaligned|not responding|"
    r"unhealthy|lost|corrupt(?:ed|ion)?|unavailable|insufficient|mismatch|crash(?:ed)?|"
    r"exited|dead|died|no such|cannot|could not|unable|fault(?:s|ed)?|"
    # a runtime's error enum named alone ("hipErrorNoDevice", "cudaErrorECCUncorrectable")
    r"(?:hip|cuda)error\w{1,40})\b"
    # a line at libfabric's warn level (src/log.c "...():%d<warn> "), whatever its words
    r"|\(\):\d{1,6}<warn> "
)
MIN_LENGTH = 12  # shorter than this, a line ("error", "FAILED") says too little to read
MAX_PER_WINDOW = 200


def suspect_line(text: str) -> JobMatch | None:
    """A line reporting a failure in words that no specific recognizer reads, else None."""
    s = text.strip()
    if len(s) < MIN_LENGTH or not _FAILURE_WORDS.search(s.lower()):
        return None
    return JobMatch(EventKind.OTHER, s, None, Severity.WARNING, {"text": s, "unclassified": True})
