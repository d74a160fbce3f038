"""NVIDIA's Xid catalog as data (xid_catalog.json) and what one Xid means on its own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

from correlator.taxonomy import Blame, Category, Verdict

CATALOG_SOURCE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

# Xids that the catalog sends to the application first (RESTART_APP / WORKFLOW_XID_13/31) but
# that point at the GPU when the same GPU keeps raising them under different jobs and users.
USER_FAULT_XIDS: frozenset[int] = frozenset({13, 31, 43})


@dataclass(frozen=True)
class XidInfo:
    """One row of NVIDIA's Xid catalog plus fleetmedic's mapping onto the taxonomy."""

    code: int
    mnemonic: str
    description: str
    immediate_action: str | None  # NVIDIA's "Resolution Bucket (Immediate Action)"
    investigatory_action: str | None  # NVIDIA's "Resolution Bucket (Investigatory Action)"
    rule: str  # name of the rule class in xid_catalog.json
    category: Category | None
    blame: Blame
    action: str
    confidence: float
    priority: int
    root_cause: bool

    @property
    def unused(self) -> bool:
        """True when NVIDIA lists the code as unused on Ampere and newer GPUs."""
        return self.rule == "unused"


def _load() -> dict[int, XidInfo]:
    text = resources.files("correlator.rules").joinpath("xid_catalog.json").read_text("utf-8")
    doc = json.loads(text)
    rules = doc["rules"]
    out: dict[int, XidInfo] = {}
    for code_s, row in doc["codes"].items():
        rule = rules[row["rule"]]
        out[int(code_s)] = XidInfo(
            code=int(code_s),
            mnemonic=row["mnemonic"],
            description=row["description"],
            immediate_action=row["immediate_action"],
            investigatory_action=row["investigatory_action"],
            rule=row["rule"],
            category=Category(rule["category"]) if rule["category"] else None,
            blame=Blame(rule["blame"]),
            action=rule["action"],
            confidence=float(rule["confidence"]),
            priority=int(rule["priority"]),
            root_cause=bool(rule["root_cause"]),
        )
    return out


XID_CATALOG: dict[int, XidInfo] = _load()


def xid_info(code: int) -> XidInfo | None:
    """The catalog row of an Xid code, or None when NVIDIA's catalog does not list it."""
    return XID_CATALOG.get(code)


# Xid 154 names the action the driver wants, e.g.
# "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)".
_RECOVERY_RE = re.compile(
    # from the first 'recovery action changed from ' of a line: a later one on the line reaches
    # less, so it matches only when the first does (retrying each was quadratic)
    r"(?<![^\n])(?>[^\n]*?recovery action changed from ).*? to (0x[0-9a-fA-F]+)\s*\(([^)]*)\)",
    re.I,
)
_RECOVERY_ACTIONS: dict[int, tuple[Category | None, Blame, str]] = {
    0: (None, Blame.UNKNOWN, "none: the GPU can be used again by starting a new process"),
    1: (Category.GPU_HARDWARE, Blame.NODE, "drain the node and reset the GPU (nvidia-smi -r)"),
    2: (Category.GPU_HARDWARE, Blame.NODE, "drain and reboot the node"),
    3: (Category.INTERCONNECT, Blame.NODE, "drain peer-to-peer (NVLink) traffic, then reset"),
    4: (Category.INTERCONNECT, Blame.NODE, "drain peer-to-peer traffic and reset the GPU"),
    5: (Category.INTERCONNECT, Blame.INFRA, "recover the IMEX domain"),
    6: (Category.GPU_HARDWARE, Blame.NODE, "drain the node and reset the GPU's PCIe bus"),
    7: (Category.GPU_HARDWARE, Blame.NODE, "drain and reboot the system"),
}


def _xid154_verdict(info: XidInfo, text: str) -> Verdict:
    match = _RECOVERY_RE.search(text)
    if match is None:
        return _verdict(info, text)
    value = int(match.group(1), 16)
    category, blame, action = _RECOVERY_ACTIONS.get(
        value, (None, Blame.UNKNOWN, f"follow the driver's recovery action {match.group(2)!r}")
    )
    return Verdict(
        category=category,
        blame=blame,
        action=action,
        confidence=0.85 if category else 0.3,
        summary=f"Xid 154: GPU recovery action changed to {match.group(2).strip()}",
        root_cause=False,
        priority=info.priority,
    )


def _verdict(info: XidInfo, text: str) -> Verdict:
    summary = f"Xid {info.code} ({info.mnemonic}): {info.description}"
    if info.unused:
        summary += f"; NVIDIA lists it as unused on current GPUs; raw: {text.strip()[:300]}"
    return Verdict(
        category=info.category,
        blame=info.blame,
        action=info.action,
        confidence=info.confidence,
        summary=summary,
        root_cause=info.root_cause,
        priority=info.priority,
    )


# Newer drivers name the Xid that a preemptive cleanup (Xid 45) followed.
_CAUSED_BY_RE = re.compile(r"caused by previous Xid (\d+)", re.I)


def caused_by(text: str) -> int | None:
    """The earlier Xid that an Xid 45 line says caused it, if it says so."""
    m = _CAUSED_BY_RE.search(text)
    return int(m.group(1)) if m else None


def xid_verdict(code: int, text: str = "") -> Verdict:
    """What one Xid means alone; an uncatalogued code stays unknown, quoting its raw text."""
    cause = caused_by(text) if code == 45 else None
    if cause is not None and cause != 45:
        inner = xid_verdict(cause)
        return Verdict(
            category=inner.category,
            blame=inner.blame,
            action=inner.action,
            confidence=round(inner.confidence * 0.9, 2),
            summary=f"Xid 45 (preemptive cleanup) caused by {inner.summary}",
            root_cause=inner.root_cause,
            priority=inner.priority,
        )
    info = xid_info(code)
    if info is None:
        return Verdict(
            category=None,
            blame=Blame.UNKNOWN,
            action="look the code up in NVIDIA's Xid catalog or contact support",
            confidence=0.0,
            summary=f"Xid {code} is not in NVIDIA's catalog; raw: {text.strip()[:300]}",
            root_cause=True,
            priority=10,
        )
    if code == 154:
        return _xid154_verdict(info, text)
    return _verdict(info, text)


def repeated_user_fault(
    faults: Iterable[tuple[str | None, str | None]], *, min_jobs: int = 2, min_users: int = 2
) -> bool:
    """True when one GPU raised a user-fault Xid (13/31/43) under enough distinct jobs and users.

    `faults` are (job_id, user) pairs of the faults seen on that one GPU; unknown parts are None
    and count for nothing, so a GPU is only blamed on evidence.
    """
    jobs: set[str] = set()
    users: set[str] = set()
    for job_id, user in faults:
        if job_id:
            jobs.add(job_id)
        if user:
            users.add(user)
    return len(jobs) >= min_jobs and len(users) >= min_users


def repeated_user_fault_verdict(code: int, *, distinct_jobs: int, distinct_users: int) -> Verdict:
    """The verdict for a user-fault Xid once the engine found it repeating across jobs and users."""
    return Verdict(
        category=Category.GPU_HARDWARE,
        blame=Blame.NODE,
        action=(
            "drain the node, run dcgmi diag -r 3 on the GPU and reset it; contact support if "
            "it fails"
        ),
        confidence=min(0.95, 0.6 + 0.1 * min(distinct_jobs, distinct_users)),
        summary=(
            f"Xid {code} on the same GPU under {distinct_jobs} different jobs and "
            f"{distinct_users} users: the GPU, not the programs, is the likely cause"
        ),
        root_cause=True,
        priority=85,
    )
