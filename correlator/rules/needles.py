"""Literal "needles" a regex cannot match without, so most rules are skipped by a cheap `in`.

Python's `re` is slow on long case-insensitive alternations (tens of µs per rule per line);
a substring test on the lower-cased text is ~100x cheaper. For each top-level alternative of
a pattern we keep its longest run of plain literal characters; if any alternative has none
(or one shorter than 3 characters), the rule gets no needles and its regex always runs.
"""

from __future__ import annotations

_META = set(".^$*+?{}[]()|\\")
_ZERO_WIDTH_ESCAPES = set("bBAZ")
_QUANTIFIERS = set("?*{")
MIN_NEEDLE = 3


def _split_top(pattern: str) -> list[str] | None:
    """Top-level alternatives of `pattern`, or None if it cannot be split safely."""
    parts, depth, in_class, start, i = [], 0, False, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    if depth != 0 or in_class:
        return None
    parts.append(pattern[start:])
    return parts


def _runs(branch: str) -> list[str]:
    """Runs of literal characters every match of `branch` must contain, in order."""
    runs: list[str] = []
    cur: list[str] = []
    depth = 0
    i = 0

    def close() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    while i < len(branch):
        c = branch[i]
        nxt = branch[i + 1] if i + 1 < len(branch) else ""
        if c == "\\":
            esc = nxt
            i += 2
            if esc in _ZERO_WIDTH_ESCAPES:
                continue  # \b and friends match no character
            if depth == 0 and esc and not esc.isalnum():
                literal_next = branch[i] if i < len(branch) else ""
                if literal_next in _QUANTIFIERS:
                    close()
                else:
                    cur.append(esc)
                continue
            close()
            continue
        if c == "(":
            depth += 1
            close()
        elif c == ")":
            depth -= 1
            close()
            if nxt in _QUANTIFIERS:
                close()
        elif c == "[" or depth > 0 or c in _META:
            close()
            if c in "[{":  # skip a character class or a {m,n} quantifier body
                j = branch.find("]" if c == "[" else "}", i + 2 if c == "[" else i + 1)
                i = (j if j != -1 else len(branch) - 1) + 1
                continue
        elif nxt in _QUANTIFIERS:
            close()  # an optional or repeated last character is not required
        else:
            cur.append(c)
        i += 1
    close()
    return runs


def needles_of(pattern: str) -> tuple[str, ...]:
    """One lower-case literal per top-level alternative, or () when the rule cannot be gated."""
    branches = _split_top(pattern)
    if not branches:
        return ()
    out: list[str] = []
    for branch in branches:
        runs = [r.lower() for r in _runs(branch) if len(r.strip()) >= MIN_NEEDLE]
        if not runs:
            return ()
        out.append(max(runs, key=len))
    return tuple(dict.fromkeys(out))


def anchors_for(needles: set[str], size: int = 4) -> tuple[str, ...]:
    """A small set of substrings such that every needle contains at least one of them.

    A line that contains none of the anchors contains none of the needles, so it can be
    skipped with a handful of `in` tests instead of one test per needle.
    """
    uncovered = set(needles)
    chosen: list[str] = []
    while uncovered:
        counts: dict[str, int] = {}
        for needle in uncovered:
            grams = (
                {needle}
                if len(needle) <= size
                else {needle[i : i + size] for i in range(len(needle) - size + 1)}
            )
            for gram in grams:
                counts[gram] = counts.get(gram, 0) + 1
        best = max(counts, key=lambda g: (counts[g], -len(g), g))
        chosen.append(best)
        uncovered = {n for n in uncovered if best not in n}
    return tuple(chosen)
