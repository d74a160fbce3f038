"""Log-pattern rules as data: which text means which failure, most specific first."""

from __future__ import annotations

from correlator.rules.emitters import EMITTER_RULES
from correlator.rules.needles import anchors_for
from correlator.rules.pattern_rule import PatternRule
from correlator.rules.patterns_hw import HARDWARE
from correlator.rules.patterns_job import JOB_AND_SCHEDULER

__all__ = ["PATTERNS", "PatternRule", "could_match"]

# Order matters: the first rule whose regex matches an event's text wins. The emitter families
# (written from each emitter's own source, see emitters/) are the most specific, so they go first.
PATTERNS: tuple[PatternRule, ...] = EMITTER_RULES + HARDWARE + JOB_AND_SCHEDULER

# Most log lines can match no rule at all: a few substring tests on the lower-cased line,
# chosen so that every needle of every rule contains one of them, rule that out cheaply.
_ALL_GATED = all(rule.needles for rule in PATTERNS)
_ANCHORS = anchors_for({n for r in PATTERNS for n in r.needles})


def could_match(lower: str) -> bool:
    """False only when no pattern rule can match the (lower-cased) text."""
    return not _ALL_GATED or any(a in lower for a in _ANCHORS)
