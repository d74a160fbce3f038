"""The shape of one log-pattern rule and the helpers the rule tables are written with."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from correlator.rules import signals
from correlator.rules.hosts import peer_host, rank_peer
from correlator.rules.needles import needles_of
from correlator.rules.xid import xid_info, xid_verdict
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
    family: str = ""  # the emitter family the rule comes from (see emitters/*.json)
    # Who the line points at: "printer" (the host that logged it), "peer" (the host captured in
    # the regex group `peer`; never the printer), "peer_or_printer" (the peer if the line names
    # one, else the printer), "none" (a symptom every rank prints), "printer_names_peer" (the
    # printer, but the peer it names is kept: see Verdict.peer_named).
    culprit: str = "printer"
    # "" gives the fixed verdict; "exit" asks the signal reasoner (groups `code`/`signal`);
    # "xid" asks the Xid catalog (group `xid`); "xid_mention" too, for a catalogued code only,
    # and no surer or stronger than the rule says (an Xid quoted, not the driver's own line).
    reason: str = ""
    shell: bool = False  # an exit `code` follows the shell's 128 + signal convention
    # the code is a launcher's own exit status after sys.exit(-N): 256 - N for signal N
    mod256: bool = False
    fallback: bool = False  # a family's catch-all: tried after every specific rule
    # A health check's failure or a node's drain is an outcome, not a cause (rules/checks.py):
    # "names" (the message in group `cause` may name the fault the check found, which then
    # decides) or "generic" (a failure that carries no cause: a fault shown beside it decides).
    outcome: str = ""

    def search(self, text: str, lower: str) -> bool:
        """True when the rule matches `text` (`lower` is text.lower(), computed once)."""
        if self.needles and not any(n in lower for n in self.needles):
            return False
        return self.regex.search(text) is not None

    def verdict(self) -> Verdict:
        """The verdict this rule gives when it matches (the fixed one; see `judge`)."""
        return Verdict(
            category=self.category,
            blame=self.blame,
            action=self.action,
            confidence=self.confidence,
            summary=self.summary,
            root_cause=self.root_cause,
            priority=self.priority,
            at_printer=self.culprit in ("printer", "printer_names_peer"),
        )

    def _mentioned_xid(self, xid: str | None, text: str) -> Verdict | None:
        if not xid or xid_info(int(xid)) is None:
            return None
        base = xid_verdict(int(xid), text)
        return replace(
            base,
            confidence=min(base.confidence, self.confidence),
            priority=min(base.priority, self.priority),
        )

    def judge(self, text: str, lower: str) -> Verdict | None:
        """The verdict for `text` if the rule matches it, using what the match captured."""
        if self.needles and not any(n in lower for n in self.needles):
            return None
        m = self.regex.search(text)
        if m is None:
            return None
        groups = m.groupdict()
        if self.reason == "exit":
            base = signals.verdict_from(
                groups.get("code"), groups.get("signal"), shell=self.shell, mod256=self.mod256
            )
        elif self.reason == "xid":
            base = xid_verdict(int(groups["xid"]), text) if groups.get("xid") else None
        elif self.reason == "xid_mention":
            base = self._mentioned_xid(groups.get("xid"), text)
        else:
            base = self.verdict()
        if base is None:
            return None
        if self.culprit == "printer_names_peer":
            return replace(base, at_printer=True, peer_named=peer_host(groups.get("peer")))
        peer = peer_host(groups.get("peer")) if self.culprit.startswith("peer") else None
        if self.culprit == "peer" and groups.get("peer_rank"):
            peer = rank_peer(groups["peer_rank"])  # a rank: hosts_ranks.py tells its host
        at_printer = self.culprit == "printer" or (self.culprit == "peer_or_printer" and not peer)
        return replace(base, culprit=peer, at_printer=at_printer)


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
