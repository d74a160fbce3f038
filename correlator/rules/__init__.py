"""Rules as data: what one event means on its own (Xid catalog, log patterns, kind defaults).

The engine (attribution, incidents) combines these single-event verdicts across events; the
only cross-event helper here is the repeated user-fault check for Xid 13/31/43.
"""

from __future__ import annotations

from collector.parse.transcribe import transcribed
from correlator.rules import checks, signals
from correlator.rules.patterns import PATTERNS, PatternRule, could_match
from correlator.rules.xid import (
    CATALOG_SOURCE,
    USER_FAULT_XIDS,
    XID_CATALOG,
    XidInfo,
    caused_by,
    repeated_user_fault,
    repeated_user_fault_verdict,
    xid_info,
    xid_verdict,
)
from correlator.taxonomy import Blame, Category, Verdict
from timeline.models import Event, EventKind

__all__ = [
    "CATALOG_SOURCE",
    "PATTERNS",
    "USER_FAULT_XIDS",
    "XID_CATALOG",
    "PatternRule",
    "XidInfo",
    "caused_by",
    "classify_event",
    "classify_text",
    "could_match",
    "first_rule",
    "repeated_user_fault",
    "repeated_user_fault_verdict",
    "xid_info",
    "xid_verdict",
]


def _v(
    category: Category | None,
    blame: Blame,
    action: str,
    confidence: float,
    summary: str,
    root_cause: bool = True,
    priority: int = 0,
    at_printer: bool = True,
) -> Verdict:
    return Verdict(
        category, blame, action, confidence, summary, root_cause, priority, at_printer=at_printer
    )


_DRAIN = "drain the node, reset the GPU and resubmit the job"

# When no pattern matches an event's text, its kind alone still says something.
KIND_DEFAULTS: dict[EventKind, Verdict] = {
    EventKind.GPU_LOST: _v(
        Category.GPU_HARDWARE,
        Blame.NODE,
        _DRAIN + "; reboot if reset fails",
        0.9,
        "the driver lost the GPU",
        priority=95,
    ),
    EventKind.SXID: _v(
        Category.INTERCONNECT,
        Blame.NODE,
        "drain the node and reset the NVSwitch fabric",
        0.7,
        "NVSwitch error (SXid)",
        priority=75,
    ),
    EventKind.NVLINK: _v(
        Category.INTERCONNECT,
        Blame.NODE,
        "drain the node and check its NVLinks",
        0.6,
        "NVLink errors",
        priority=60,
    ),
    EventKind.GSP: _v(
        Category.GPU_HARDWARE, Blame.NODE, _DRAIN, 0.8, "GPU firmware (GSP) error", priority=80
    ),
    EventKind.PCIE_AER: _v(
        Category.GPU_HARDWARE,
        Blame.UNKNOWN,
        "watch the GPU's PCIe link",
        0.4,
        "PCIe error on the GPU's link",
        priority=30,
    ),
    EventKind.THERMAL: _v(
        Category.GPU_HARDWARE,
        Blame.NODE,
        "check the node's cooling",
        0.5,
        "GPU thermal or power event",
        priority=30,
    ),
    EventKind.NCCL_TIMEOUT: _v(
        Category.NCCL_TIMEOUT_UNKNOWN,
        Blame.UNKNOWN,
        "find the rank that stopped first; resubmit from checkpoint",
        0.5,
        "a NCCL collective timed out (symptom; root cause not shown)",
        root_cause=False,
        priority=10,
        at_printer=False,
    ),
    EventKind.NCCL_ERROR: _v(
        Category.INTERCONNECT,
        Blame.UNKNOWN,
        "rerun with NCCL_DEBUG=INFO to see the failing call",
        0.3,
        "NCCL reported an error",
        root_cause=False,
        priority=15,
        at_printer=False,
    ),
    EventKind.CUDA_ERROR: _v(
        Category.USER_CODE,
        Blame.JOB,
        "fix the program and resubmit",
        0.4,
        "the program hit a CUDA error",
        priority=30,
    ),
    EventKind.CUDA_OOM: _v(
        Category.OOM_GPU,
        Blame.JOB,
        "reduce memory per GPU and resubmit",
        0.85,
        "the job ran out of GPU memory",
        priority=55,
    ),
    EventKind.HOST_OOM: _v(
        Category.OOM_HOST,
        Blame.JOB,
        "request more host memory and resubmit",
        0.8,
        "the job ran out of host memory",
        priority=60,
    ),
    EventKind.CHILD_FAILED: _v(
        None,
        Blame.UNKNOWN,
        "read the failing rank's own log",
        0.2,
        "a worker process of the distributed job failed",
        root_cause=False,
        priority=5,
    ),
    EventKind.PROGRESS_STALLED: _v(
        Category.NCCL_TIMEOUT_UNKNOWN,
        Blame.UNKNOWN,
        "check whether the job is hung",
        0.3,
        "the job stopped logging training steps",
        root_cause=False,
        priority=8,
        at_printer=False,
    ),
}


def _text(event: Event) -> str:
    parts = [event.raw or "", event.message or ""]
    for key in ("reason", "state", "text"):
        value = event.payload.get(key)
        if isinstance(value, str):
            parts.append(value)
    return "\n".join(p for p in parts if p)


def _ecc_or_remap(event: Event) -> Verdict | None:
    payload = event.payload
    if event.kind is EventKind.ROW_REMAP:
        if payload.get("failure") or payload.get("remap_failure"):
            return _v(
                Category.GPU_HARDWARE,
                Blame.NODE,
                "drain the node; a failed row remap means RMA",
                0.9,
                "GPU memory row remapping failed",
                priority=88,
            )
        if payload.get("uncorrectable_remapped"):
            # DCGM_FR_UNCORRECTABLE_ROW_REMAP (NVIDIA/DCGM dcgmlib/dcgm_errors.h): "had
            # uncorrectable memory errors and %u rows were remapped"; as the dcgm family reads it
            return _v(
                Category.GPU_HARDWARE,
                Blame.NODE,
                "drain the node and run a field diagnostic (dcgmi diag -r 3) on the GPU",
                0.6,
                "GPU memory rows were remapped after uncorrectable errors",
                priority=40,
            )
        return _v(
            Category.GPU_HARDWARE,
            Blame.NODE,
            "reset the GPU when idle (drain first) to activate the pending row remap",
            0.6,
            "a GPU memory row remap is pending",
            priority=40,
        )
    if event.kind is EventKind.ECC:
        if payload.get("dbe") or "dbe" in str(payload.get("type", payload.get("ecc", ""))).lower():
            return _v(
                Category.GPU_HARDWARE,
                Blame.NODE,
                _DRAIN,
                0.85,
                "uncorrectable (double-bit) ECC errors",
                priority=88,
            )
        return _v(
            Category.GPU_HARDWARE,
            Blame.UNKNOWN,
            "watch the GPU's ECC counters",
            0.3,
            "correctable ECC errors",
            priority=20,
        )
    return None


def first_rule(
    text: str, kind: EventKind | None = None, *, fallbacks: bool = True
) -> tuple[PatternRule, Verdict] | None:
    """The first pattern rule matching `text` (restricted by kind) and its verdict, or None;
    `fallbacks=False` leaves out the families' catch-alls. The rules read the text as printed:
    a copied log's smart quotes, HTML entities and markdown are undone first (transcribe.py).
    A health check's failure or a drain (an `outcome` rule) gives the fault its message names,
    read by the other rules (checks.py)."""
    text = transcribed(text)
    lower = text.lower()
    if not could_match(lower):
        return None
    found = _first(text, lower, kind, fallbacks=fallbacks, outcomes=True)
    if found is None or not found[0].outcome:
        return found
    # a check's failure or a drain: the fault its message names, read by the other rules
    rule, verdict = found

    def reread(cause: str) -> tuple[PatternRule, Verdict] | None:
        return _first(cause, cause.lower(), kind, fallbacks=True, outcomes=False)

    return rule, checks.read_outcome(rule, verdict, text, reread)


def _first(
    text: str, lower: str, kind: EventKind | None, *, fallbacks: bool, outcomes: bool
) -> tuple[PatternRule, Verdict] | None:
    for rule in PATTERNS:
        if rule.kinds is not None and (kind is None or kind not in rule.kinds):
            continue
        if (rule.fallback and not fallbacks) or (rule.outcome and not outcomes):
            continue
        verdict = rule.judge(text, lower)
        if verdict is not None:
            return rule, verdict
    return None


def classify_text(
    text: str, kind: EventKind | None = None, *, fallbacks: bool = True
) -> Verdict | None:
    """The verdict of the first pattern rule matching `text` (first_rule), or None."""
    found = first_rule(text, kind, fallbacks=fallbacks)
    return found[1] if found else None


def _child_failed(event: Event) -> Verdict | None:
    """A ChildFailedError or elastic failure: what its root rank's signal or exit code says."""
    if event.kind is not EventKind.CHILD_FAILED:
        return None
    signal, code = event.payload.get("signal"), event.payload.get("exit_code", event.code)
    if isinstance(signal, int):
        return signals.signal_verdict(signal)
    if isinstance(code, int):
        return signals.verdict_from(code)
    return None


def classify_event(event: Event) -> Verdict | None:
    """What ONE event means alone; None when it says nothing about a failure."""
    text = _text(event)
    killed = _child_failed(event)
    if killed is not None:
        # A worker's signal or exit code is a weak sign; a cause its own line states (PyTorch:
        # "workers are out of shared memory") is stronger.
        stated = classify_text(text, event.kind)
        return stated if stated is not None and stated.root_cause else killed
    if event.kind is EventKind.XID:
        if event.code is None:
            return _v(
                None,
                Blame.UNKNOWN,
                "inspect the raw line",
                0.0,
                f"Xid without a code; raw: {text[:300]}",
                priority=10,
            )
        return xid_verdict(event.code, text)
    # An event whose kind already says what it is (a lost GPU, an NCCL timeout) is not
    # re-read by a family's catch-all for generic failure lines.
    verdict = classify_text(text, event.kind, fallbacks=event.kind not in KIND_DEFAULTS)
    if verdict is not None:
        return verdict
    structured = _ecc_or_remap(event)
    if structured is not None:
        return structured
    return KIND_DEFAULTS.get(event.kind)
