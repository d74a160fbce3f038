"""`fleetmedic explain`: raw text in, one explained verdict out (no store needed)."""

from __future__ import annotations

from collections.abc import Iterator

from correlator.explain.evidence import quoted_evidence
from correlator.explain.hosts import own_addresses
from correlator.explain.hosts_ranks import rank_hosts
from correlator.explain.models import ExplainInputError, Explanation
from correlator.explain.readers import read_delivered
from correlator.explain.reasoning import (
    conclude,
    findings,
    gpu_of,
    job_and_user,
    node_of,
    xid_of,
)
from correlator.explain.render import human, sentence
from correlator.explain.rewrap import rewrapped

__all__ = [
    "ExplainInputError",
    "Explanation",
    "decode",
    "explain_bytes",
    "explain_text",
    "human",
    "readings",
]

MAX_INPUT_BYTES = 64 * 1024 * 1024


def decode(data: bytes) -> str:
    """Bytes -> text; raises ExplainInputError for binary data."""
    if len(data) > MAX_INPUT_BYTES:
        raise ExplainInputError(f"input is {len(data)} bytes; at most {MAX_INPUT_BYTES} are read")
    if b"\x00" in data[:65536]:
        raise ExplainInputError("input looks binary (NUL bytes); give a text log")
    text = data.decode("utf-8", errors="replace")
    sample = text[:65536]
    bad = sum(1 for c in sample if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n\r\f\v\x1b"))
    if sample and bad / len(sample) > 0.1:
        raise ExplainInputError("input looks binary (mostly non-text bytes); give a text log")
    return text


def _nothing(reason: str) -> Explanation:
    return Explanation(
        category=None,
        blame="unknown",
        node=None,
        gpu=None,
        xid=None,
        confidence=0.0,
        action=None,
        explanation=reason,
        evidence=[],
    )


def explain_text(text: str) -> Explanation:
    """Read every kind of evidence in `text` and explain the most likely root cause."""
    if not text.strip():
        return _nothing("The input is empty: there is nothing to explain.")
    got = next((e for t, pieces in readings(text) if (e := _explained(t, pieces))), None)
    if got is None:
        return _nothing(
            "No failure evidence that fleetmedic recognises was found in the input "
            "(Xid, NCCL, CUDA, OOM, scheduler or node-failure lines)."
        )
    return got


def readings(text: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The ways explain reads `text`, in turn until one shows a failure: as it came, then (a
    wrapped paste) with its lines joined again, a terminal's cut first; each with its joined
    lines' pieces as pasted."""
    yield text, {}
    for hard in (True, False):
        if (again := rewrapped(text, hard=hard)) is not None:
            yield again


def _explained(text: str, pieces: dict[str, str]) -> Explanation | None:
    """The explanation of `text`, or None; `pieces`: a joined line's lines as pasted."""
    events, hosts, delivered, suspects = read_delivered(text)
    owners = {**rank_hosts(delivered.lines), **own_addresses(delivered.lines)}
    conclusion = conclude(findings(events), owners)
    if conclusion is None:
        return None
    node = node_of(conclusion, hosts, owners, suspects=suspects)
    gpu, index = gpu_of(conclusion)
    job, user = job_and_user(conclusion)
    evidence = quoted_evidence(conclusion, delivered, pieces, node)
    v = conclusion.verdict
    return Explanation(
        category=v.category.value if v.category else None,
        blame=v.blame.value,
        node=node,
        gpu=gpu,
        xid=xid_of(conclusion),
        confidence=v.confidence,
        action=v.action,
        explanation=sentence(conclusion, node=node, gpu=gpu, index=index, job=job, user=user),
        evidence=evidence,
    )


def explain_bytes(data: bytes) -> Explanation:
    """explain_text on raw bytes; ExplainInputError when they are not text."""
    return explain_text(decode(data))
