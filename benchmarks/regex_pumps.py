"""Adversarial (prefix, unit) shapes read from one regex's parse tree, for benchmarks/regex_sweep.

A backtracking pattern is slow when a repeat (or two repeats side by side) can take a long run
in many ways and what follows then fails: the text that leads up to a repeat, then that repeat's
body (or the pattern's own literal fragments) many times over, with no ending, is the classic
shape. The tree is read with re._parser, CPython's own parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]
from typing import Any

MAX_FRAGMENTS = 8  # literal fragments (longest first) a pattern's shapes use
MAX_SITES = 8  # repeats whose leading text is a prefix
_PLAIN = "a0 .:-_/=,x@[]()\t"  # characters tried when a class says what it refuses
_CATEGORY = {
    C.CATEGORY_DIGIT: "0",
    C.CATEGORY_NOT_DIGIT: "a",
    C.CATEGORY_WORD: "a",
    C.CATEGORY_NOT_WORD: " ",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_NOT_SPACE: "a",
    C.CATEGORY_LINEBREAK: "\n",
    C.CATEGORY_NOT_LINEBREAK: "a",
}


def _class_chars(items: list[tuple[Any, Any]]) -> list[str]:
    """A few characters a character class accepts (one per item, or plain ones it allows)."""
    if items and items[0][0] is C.NEGATE:
        regex = re.compile("[" + _unparse_class(items) + "]")
        return [c for c in _PLAIN if regex.fullmatch(c)][:3]
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.RANGE:
            out.append(chr(av[0]))
        elif op is C.CATEGORY:
            out.append(_CATEGORY.get(av, "a"))
    return list(dict.fromkeys(out))[:3]


def _unparse_class(items: list[tuple[Any, Any]]) -> str:
    """A negated class's items written back as regex text (for testing candidates)."""
    parts = []
    for op, av in items:
        if op is C.NEGATE:
            parts.append("^")
        elif op is C.LITERAL:
            parts.append(re.escape(chr(av)))
        elif op is C.RANGE:
            parts.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif op is C.CATEGORY:
            parts.append({"0": r"\d", " ": r"\s", "a": r"\w"}.get(_CATEGORY.get(av, ""), ""))
    return "".join(parts) or "^"


@dataclass
class _Reader:
    """Walks a parse tree writing one sample text, noting each repeat's site and the literals."""

    out: list[str] = field(default_factory=list)
    sites: list[tuple[str, list[str]]] = field(default_factory=list)  # (leading text, bodies)
    fragments: list[str] = field(default_factory=list)
    _run: list[str] = field(default_factory=list)

    def _end_run(self) -> None:
        if self._run:
            self.fragments.append("".join(self._run))
            self._run = []

    def seq(self, items: Any, record: bool = True) -> None:
        """Write a sample of `items` (a subpattern) and note its repeats when `record`."""
        for op, av in items:
            if op is C.LITERAL:
                self.out.append(chr(av))
                if record:
                    self._run.append(chr(av))
                continue
            if record:
                self._end_run()
            self._one(op, av, record)
        if record:
            self._end_run()

    def _sample(self, items: Any) -> str:
        sub = _Reader()
        sub.seq(items, record=False)
        return "".join(sub.out)

    def _one(self, op: Any, av: Any, record: bool) -> None:
        if op is C.NOT_LITERAL:
            self.out.append("b" if chr(av) == "a" else "a")
        elif op is C.ANY:
            self.out.append("a")
        elif op is C.IN:
            self.out.append((_class_chars(av) or ["a"])[0])
        elif op is C.CATEGORY:
            self.out.append(_CATEGORY.get(av, "a"))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, body = av
            if record and (hi is C.MAXREPEAT or hi >= 16):
                bodies = [self._sample(body)]
                if len(body) == 1 and body[0][0] is C.IN:
                    bodies += _class_chars(body[0][1])
                self.sites.append(("".join(self.out), [b for b in bodies if b]))
            self.seq(body, record)
            for _ in range(max(lo, 1) - 1):
                self.seq(body, record=False)
        elif op in (C.SUBPATTERN, C.ATOMIC_GROUP):
            self.seq(av[-1] if op is C.SUBPATTERN else av, record)
        elif op is C.BRANCH:
            leading = list(self.out)
            for alt in av[1][1:]:  # the other branches' repeats and literals, from the same text
                sub = _Reader(out=list(leading))
                sub.seq(alt, record)
                self.sites += sub.sites
                self.fragments += sub.fragments
            self.seq(av[1][0], record)
        elif op is C.GROUPREF_EXISTS:
            self.seq(av[1], record)
        # AT, ASSERT, ASSERT_NOT, GROUPREF: nothing written


def _read(regex: re.Pattern[str]) -> _Reader:
    reader = _Reader()
    reader.seq(P.parse(regex.pattern, regex.flags & ~re.U))
    return reader


def literal_start(regex: re.Pattern[str]) -> str:
    """The sample text the pattern writes before its first repeat (or all of it)."""
    reader = _read(regex)
    return reader.sites[0][0] if reader.sites else "".join(reader.out)


def pumps(regex: re.Pattern[str]) -> Iterator[tuple[str, str]]:
    """(prefix, unit) shapes from the pattern: each repeat's leading text with its body, its
    neighbour's body and the literal fragments; the fragments and their pairs on their own."""
    reader = _read(regex)
    frags = sorted(dict.fromkeys(f for f in reader.fragments if f.strip()), key=len)[::-1]
    frags = frags[:MAX_FRAGMENTS]
    sites = reader.sites[:MAX_SITES]
    for i, (lead, bodies) in enumerate(sites):
        for body in bodies:
            yield lead, body
        if i + 1 < len(sites) and bodies and sites[i + 1][1]:
            yield lead, bodies[0] + sites[i + 1][1][0]
        for frag in frags:
            yield lead, frag
    for i, frag in enumerate(frags):
        yield "", frag
        for other in frags[i + 1 : i + 3]:
            yield "", frag + other
            yield "", other + frag
