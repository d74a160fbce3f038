"""Plain-English explanation and the readable (non-JSON) form of an Explanation."""

from __future__ import annotations

import re
import textwrap

from correlator.explain.models import Explanation
from correlator.explain.reasoning import Conclusion

# A sentence ends at . ! or ? before a space and a capital (not "e.g. preemption", "1.5 GiB").
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _first_sentence(message: str) -> str:
    # a quoted message of several sentences (XLA's coordination errors run to four) would drown
    # the explanation's own few sentences; the evidence keeps the whole line
    return _SENTENCE_END.split(message.strip(), maxsplit=1)[0].rstrip(".")


def _where(gpu: str | None, index: int | None, node: str | None) -> str:
    parts = []
    if gpu or index is not None:
        label = f"GPU {gpu}" if gpu else "GPU"
        if index is not None:
            label += f" (index {index})"
        parts.append(label)
    if node:
        parts.append(f"on node {node}" if parts else f"node {node}")
    return " ".join(parts)


def _details(conclusion: Conclusion) -> str:
    """What NCCL timeout payloads add: ranks, operation, sequence number, timeout."""
    ranks: set[object] = set()
    ops: set[object] = set()
    seqs: set[object] = set()
    timeouts: set[object] = set()
    for f in conclusion.support:
        p = f.event.payload
        for key, bag in (
            ("rank", ranks),
            ("op_type", ops),
            ("seq_num", seqs),
            ("timeout_ms", timeouts),
        ):
            if isinstance(p.get(key), int | str):
                bag.add(p[key])
    if not (ranks or ops or seqs):
        return ""
    bits = []
    if ranks:
        word = "rank " if len(ranks) == 1 else "ranks "
        bits.append(word + ", ".join(str(r) for r in sorted(ranks, key=str)))
    if ops:
        bits.append("in " + "/".join(sorted(map(str, ops))))
    if seqs:
        bits.append("SeqNum " + "/".join(str(s) for s in sorted(seqs, key=str)))
    if timeouts:
        bits.append(f"timeout {'/'.join(str(t) for t in sorted(timeouts, key=str))} ms")
    return " (" + ", ".join(bits) + ")"


def sentence(
    conclusion: Conclusion,
    *,
    node: str | None,
    gpu: str | None,
    index: int | None,
    job: str | None,
    user: str | None,
) -> str:
    """1-3 sentences: where and what, why we believe it, what to do."""
    v = conclusion.verdict
    where = _where(gpu, index, node)
    if job:
        where = (
            (where + ", " if where else "") + f"job {job}" + (f" of user {user}" if user else "")
        )
    summary = v.summary + _details(conclusion)
    if v.category is None and conclusion.support[0].event.message:
        summary += f" ({_first_sentence(conclusion.support[0].event.message)})"
    what = f"{where}: {summary}" if where else summary
    what = what[:1].upper() + what[1:]
    n = len(conclusion.support)
    why = f"The text shows it on {n} line{'s' if n != 1 else ''} (quoted as evidence)"
    if not v.root_cause:
        why += "; this is a symptom and the text shows no cause behind it"
    elif conclusion.others:
        shown = sorted({f.verdict.summary for f in conclusion.others})[:2]
        why += "; it outranks the other signs seen (" + "; ".join(shown) + ")"
    return f"{what}. {why}. Recommended: {v.action}."


def human(expl: Explanation) -> str:
    """A readable multi-line rendering for a person at a terminal."""
    head = expl.category or "no recognised failure"
    rows = [
        f"Verdict:    {head} (blame: {expl.blame}, confidence {expl.confidence:.2f})",
        f"Node:       {expl.node or '-'}",
        f"GPU:        {expl.gpu or '-'}" + (f"  Xid {expl.xid}" if expl.xid is not None else ""),
        f"Action:     {expl.action or '-'}",
        "",
        textwrap.fill(expl.explanation, width=100),
    ]
    if expl.evidence:
        rows += ["", "Evidence:"] + [f"  {line}" for line in expl.evidence]
    return "\n".join(rows)
