"""A health check's failure or a node's drain is the outcome; the fault it names is the cause.

NHC (mej/nhc @9c4a38c0c9f4, `nhc`) fails a check through die(), which logs "ERROR:  $NAME:
Health check failed:  $*" and drains the node with the same words (helpers/node-mark-offline:
Reason="NHC: $*"); each check's message is its own ("$FUNCNAME:  ...", scripts/*.nhc). A check
that fails without calling die() gets nhcmain_run_checks' generic "Node Health Check failed.
Check $CHECK returned $RET" / die "Check $CHECK returned $RET", which names no cause: what the
check printed before it (a site check's own output, or check_nv_healthmon's `log
"$NV_HEALTHMON_OUTPUT"` before its "returned failure code") is. Slurm shows the drain as
"Reason=%s [%s@%s]" (SchedMD/slurm src/api/node_info.c @008eefc6c1ae, slurm_sprint_node_table).

So when the check's message, the drain Reason, or a line beside a generic check failure names
a recognised fault (an Xid read by NVIDIA's catalog, uncorrectable ECC, a row remap, a GPU off
the bus, NVLink or an IB port down), the verdict takes that fault's category; the blame stays
the node, which the check already judged, unless the fault's own reading blames the job (the
catalog's user-fault Xids 13/31/43: RESTART_APP, the application first). A reason that names no
recognised fault ("maintenance") keeps the check's or drain's own verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from correlator.rules.pattern_rule import PatternRule
from correlator.taxonomy import Blame, Category, Verdict

# The faults of the node's own hardware a check can name; other readings of the message (a
# node-level one, a program's error) leave the check's verdict standing.
FAULT_CATEGORIES = frozenset({Category.GPU_HARDWARE, Category.INTERCONNECT})
# Rules whose verdict is NVIDIA's Xid catalog's reading of the code they capture.
_CATALOG_READINGS = frozenset({"xid", "xid_mention"})

Reread = Callable[[str], tuple[PatternRule, Verdict] | None]


def shows_fault(verdict: Verdict) -> bool:
    """True when a verdict is a recognised hardware fault of the node (a cause, not a symptom)."""
    return verdict.root_cause and verdict.category in FAULT_CATEGORIES


def _names_fault(rule: PatternRule, verdict: Verdict) -> bool:
    if not verdict.root_cause or verdict.category is None:
        return False
    return verdict.category in FAULT_CATEGORIES or rule.reason in _CATALOG_READINGS


def with_cause(check: Verdict, fault: Verdict, how: str) -> Verdict:
    """The check's failure (or drain) read as the fault it names or shows beside it (`how`)."""
    blame = Blame.JOB if fault.blame is Blame.JOB else Blame.NODE
    action = fault.action
    if blame is Blame.JOB:
        action += "; resume the node the check took out of service"
    return replace(
        check,
        category=fault.category,
        blame=blame,
        action=action,
        confidence=max(check.confidence, fault.confidence),
        priority=max(check.priority, fault.priority),
        summary=f"{check.summary}, {how} {fault.summary}",
        root_cause=True,
        cause_unstated=False,
    )


def read_outcome(rule: PatternRule, verdict: Verdict, text: str, reread: Reread) -> Verdict:
    """An outcome rule's verdict: the fault its message names (read by the other rules,
    `reread`), or its own; a generic failure is marked for the fault beside it."""
    if rule.outcome == "generic":
        return replace(verdict, cause_unstated=True)
    m = rule.regex.search(text)
    cause = m.groupdict().get("cause") if m else None
    found = reread(cause) if cause else None
    if found is None or not _names_fault(*found):
        return verdict
    return with_cause(verdict, found[1], "naming")
