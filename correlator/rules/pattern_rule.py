"""The shape of one log-pattern rule and the helpers the rule tables are written with."""

from __future__ import annotations

import re
from dataclasses import dataclass

from correlator.rules.needles import needles_of
from correlator.taxonomy import Blame, Category, Verdict
from timeline.models import EventKind as K

GPU = Category.GPU_HARDWARE
NET = Category.INTERCONNECT
NODE = Category.NODE
USER = Category.USER_CODE
HOOM = Category.OOM_HOST
GOOM = Category.OOM_GPU
SCHED = Category.SCHEDULER
NCCL = Category.NCCL_TIMEOUT_UNKNOWN


@dataclass(frozen=True)
class PatternRule:
    """One text pattern and the verdict it gives; `kinds` limits it to some event kinds."""

    name: str
    regex: re.Pattern[str]
    category: Category | None
    blame: Blame
    action: str
    confidence: float
    summary: str
    root_cause: bool = True
    priority: int = 0
    kinds: frozenset[K] | None = None  # None: any kind of event
    needles: tuple[str, ...] = ()  # lower-case literals a match must contain (a cheap gate)

    def search(self, text: str, lower: str) -> bool:
        """True when the rule matches `text` (`lower` is text.lower(), computed once)."""
        if self.needles and not any(n in lower for n in self.needles):
            return False
        return self.regex.search(text) is not None

    def verdict(self) -> Verdict:
        """The verdict this rule gives when it matches."""
        return Verdict(
            category=self.category,
            blame=self.blame,
            action=self.action,
            confidence=self.confidence,
            summary=self.summary,
            root_cause=self.root_cause,
            priority=self.priority,
        )


def _r(pattern: str, flags: int = re.I) -> re.Pattern[str]:
    return re.compile(pattern, flags)


def _p(
    name: str, pattern: str | re.Pattern[str], cat: Category | None, blame: Blame, **kw: object
) -> PatternRule:
    regex = pattern if isinstance(pattern, re.Pattern) else _r(pattern)
    kw.setdefault("needles", needles_of(regex.pattern))
    return PatternRule(name=name, regex=regex, category=cat, blame=blame, **kw)  # type: ignore[arg-type]


_DRAIN = "drain the node, reset the GPU and resubmit the job"
_FIX = "fix the program and resubmit"
_STATES = frozenset({K.JOB_STATE, K.POD_EVENT, K.NODE_STATE})
