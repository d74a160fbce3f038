"""Log-pattern rules as data: which text means which failure, most specific first."""

from __future__ import annotations

from correlator.rules.pattern_rule import PatternRule
from correlator.rules.patterns_hw import HARDWARE
from correlator.rules.patterns_job import JOB_AND_SCHEDULER

__all__ = ["PATTERNS", "PatternRule"]

# Order matters: the first rule whose regex matches an event's text wins.
PATTERNS: tuple[PatternRule, ...] = HARDWARE + JOB_AND_SCHEDULER
