"""Time every regex the project runs on untrusted text against long adversarial lines.

`python -m benchmarks.regex_sweep [--size N] [--limit S]` lists each pattern whose search took
longer than the limit on some line of about N characters, with its time at N/2 and the ratio
(about 4 when the cost grows with the square of the length). The patterns are the emitter
rules' (correlator/rules/emitters/*.json, compiled as their loader compiles them) and every
re.Pattern held at module level (or in a module-level tuple, list, dict, rule dataclass or class
body) by collector and correlator, plus the literal patterns their functions pass to re.*.
The lines: a prefix and one unit repeated (generic units, and the pattern's own literal start),
and pumps read from the pattern's parse tree (each repeat's body after the text that leads to
it, adjacent repeats' bodies together, and the pattern's literal fragments and their pairs).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import json
import pkgutil
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from benchmarks import regex_pumps

ROOTS = ("collector", "correlator")
RE_CALLS = {"compile", "search", "match", "fullmatch", "finditer", "findall", "sub", "split"}
# Prefixes the sweep puts before a generic unit: none, and a log line's usual heads.
GENERIC_UNITS = (
    " ", "\t", "a", "a ", "0", ".", ":", "=", "[", "]", "(", "/", "-", "_", ", ", "a:", "@",
    "x=", "\\", "a1", "a.", "a-", "a=", "0 ", "a, ", "a/", "[0]", "a\t", "0.", "a: ",
)  # fmt: skip


@dataclass(frozen=True)
class Found:
    """One pattern and where the project keeps it."""

    where: str
    regex: re.Pattern[str]
    how: str = "search"  # the method the code calls (module-level patterns: search, the worst)


def _rule_patterns() -> Iterator[Found]:
    """Each emitter rule's regex, compiled with the flags the loader gives it."""
    pkg = resources.files("correlator.rules.emitters")
    for entry in sorted(pkg.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        data = json.loads(entry.read_text("utf-8"))
        for spec in data["rules"]:
            flags = {"case": 0, "multiline": re.I | re.M}.get(spec.get("flags", ""), re.I)
            yield Found(f"{entry.name}:{spec['name']}", re.compile(spec["pattern"], flags))


def _walk(value: Any, where: str, depth: int, seen: set[int]) -> Iterator[Found]:
    """The patterns inside one module-level value (containers and dataclasses, a few deep)."""
    if id(value) in seen or depth > 4:
        return
    seen.add(id(value))
    if isinstance(value, re.Pattern):
        if isinstance(value.pattern, str):
            yield Found(where, value)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{where}[{k!r}]"[:120], depth + 1, seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for i, v in enumerate(value):
            yield from _walk(v, f"{where}[{i}]", depth + 1, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = getattr(value, "name", None)
        # a rule by its own name (the index in a module's tuple of rules moves as rules are added)
        where = f"{where.split('[')[0]}<{name}>" if isinstance(name, str) else where
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name), f"{where}.{f.name}", depth + 1, seen)


def _module_patterns() -> Iterator[Found]:
    """Every re.Pattern a collector or correlator module holds at module or class level."""
    seen: set[int] = set()
    for root in ROOTS:
        pkg = importlib.import_module(root)
        names = [root] + [m.name for m in pkgutil.walk_packages(pkg.__path__, root + ".")]
        for name in names:
            try:
                module = importlib.import_module(name)
            except Exception:  # a module that needs a missing extra holds nothing we run
                continue
            for attr, value in vars(module).items():
                if isinstance(value, type) and value.__module__ == name:
                    for cattr, cvalue in vars(value).items():
                        yield from _walk(cvalue, f"{name}.{attr}.{cattr}", 0, seen)
                else:
                    yield from _walk(value, f"{name}.{attr}", 0, seen)


def _flags_of(node: ast.expr | None) -> int | None:
    """The value of a flags argument written as re.X | re.Y (None when it is anything else)."""
    if node is None:
        return 0
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        flag = getattr(re, node.attr, None)
        return int(flag) if isinstance(flag, re.RegexFlag) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        a, b = _flags_of(node.left), _flags_of(node.right)
        return None if a is None or b is None else a | b
    return None


def _literal_call_patterns() -> Iterator[Found]:
    """The literal patterns functions pass to re.search / re.match / ... (compiled on call)."""
    for root in ROOTS:
        for path in sorted(Path(root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr in RE_CALLS
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    continue
                # where flags sits among the positional arguments
                at = {"compile": 1, "sub": 4, "split": 3}.get(node.func.attr, 2)
                flag_arg = node.args[at] if len(node.args) > at else None
                for kw in node.keywords:
                    flag_arg = kw.value if kw.arg == "flags" else flag_arg
                flags = _flags_of(flag_arg)
                if flags is not None:
                    regex = re.compile(node.args[0].value, flags)
                    how = node.func.attr if node.func.attr in ("match", "fullmatch") else "search"
                    yield Found(f"{path}:{node.lineno}", regex, how)


def all_patterns() -> list[Found]:
    """Every distinct (pattern, flags) the sweep times, with the first place it was found."""
    out: dict[tuple[str, int], Found] = {}
    for found in (*_rule_patterns(), *_module_patterns(), *_literal_call_patterns()):
        out.setdefault((found.regex.pattern, found.regex.flags), found)
    return list(out.values())


def lines_for(regex: re.Pattern[str], size: int) -> Iterator[tuple[str, str]]:
    """(prefix, unit) shapes for one pattern: the generic units and the pattern's own pumps."""
    start = regex_pumps.literal_start(regex)
    for unit in GENERIC_UNITS:
        yield "", unit
        if start:
            yield start, unit
    yield from regex_pumps.pumps(regex)


def build(prefix: str, unit: str, size: int) -> str:
    """The prefix and then the unit, repeated to about `size` characters."""
    return prefix + unit * max(1, (size - len(prefix)) // max(1, len(unit)))


def time_search(regex: re.Pattern[str], text: str, tries: int = 1, how: str = "search") -> float:
    """The least seconds one search (or `how`) of `text` took over `tries` (a shared machine)."""
    run = getattr(regex, how)
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        run(text)
        best = min(best, time.perf_counter() - start)
    return best


@dataclass(frozen=True)
class Slow:
    """A pattern and the shape it was slow on, timed at two lengths (the second twice the first)."""

    where: str
    pattern: str
    prefix: str
    unit: str
    size: int
    seconds: float
    half_seconds: float

    @property
    def ratio(self) -> float:
        """How much longer the full size took than the half (about 4 when quadratic)."""
        return self.seconds / max(self.half_seconds, 1e-9)


def _estimate(found: Found, prefix: str, unit: str, size: int, limit: float) -> float:
    """Seconds at `size`, timed on a 64th and an 8th of the length first.

    A shape still fast at an eighth of the length (under limit / 512, an eighth of what a
    quadratic one slow at full length takes) is not timed at full length; one already slow on
    a shorter line is not run longer but estimated as quadratic from there (a worse than
    quadratic one would not end).
    """
    t = 0.0
    for n in (size // 64, size // 8):
        t = time_search(found.regex, build(prefix, unit, n), how=found.how)
        if t > limit / 256:
            t = time_search(found.regex, build(prefix, unit, n), 2, found.how)  # not a blip
        if t > limit / 16:
            return t * (size / n) ** 2
    if t <= limit / 512:
        return t
    return time_search(found.regex, build(prefix, unit, size), 2, found.how)


def _grows_quadratically(found: Found, prefix: str, unit: str, size: int, t: float) -> bool:
    """True when half the length takes under a third of `t` (about a quarter: quadratic)."""
    half = time_search(found.regex, build(prefix, unit, size // 2), 3, found.how)
    full = min(t, time_search(found.regex, build(prefix, unit, size), 3, found.how))
    return full > 3 * half


def _still_slow(
    found: Found, prefix: str, unit: str, size: int, limit: float, growth: bool
) -> bool:
    """The shape timed again, five times each at full and half length: still over the bar."""
    full = time_search(found.regex, build(prefix, unit, size), 5, found.how)
    half = time_search(found.regex, build(prefix, unit, size // 2), 5, found.how)
    return full > limit or (growth and full > limit / 8 and full > 3 * half)


def sweep_one(found: Found, size: int, limit: float, growth: bool = False) -> Slow | None:
    """The slowest shape for one pattern when it passes `limit` seconds at `size`, else None."""
    worst: tuple[float, str, str] | None = None
    for prefix, unit in dict.fromkeys(lines_for(found.regex, size)):
        t = _estimate(found, prefix, unit, size, limit)
        # `growth`: also flag a shape under the bar that grows about as the square (noisy on a
        # shared machine at a few milliseconds, so off by default)
        if growth and limit / 8 < t <= limit and _grows_quadratically(found, prefix, unit, size, t):
            t = limit * 1.01  # under the bar here, but a line ten times longer takes 100 times
        if t > limit and (worst is None or t > worst[0]):
            worst = (t, prefix, unit)
    if worst is None:
        return None
    estimate, prefix, unit = worst
    if estimate <= 4 * limit and not _still_slow(found, prefix, unit, size, limit, growth):
        return None  # a blip of the shared machine, not the pattern
    at = size
    while estimate > 4 * limit and at > size // 64:
        at //= 2  # too slow at full length: timed at the longest length still affordable
        estimate /= 4
    # the least of three tries each: one try on a loaded machine can make the ratio anything
    full = time_search(found.regex, build(prefix, unit, at), tries=3, how=found.how)
    half = time_search(found.regex, build(prefix, unit, at // 2), tries=3, how=found.how)
    return Slow(found.where, found.regex.pattern, prefix, unit, at, full, half)


def sweep(
    size: int = 20_000,
    limit: float = 0.2,
    patterns: list[Found] | None = None,
    verbose: bool = False,
    growth: bool = False,
) -> list[Slow]:
    """Every pattern slower than `limit` on some adversarial line of `size` characters."""
    out = []
    for found in patterns if patterns is not None else all_patterns():
        if slow := sweep_one(found, size, limit, growth):
            out.append(slow)
            if verbose:
                print(slow.where, flush=True)
    return out


def main() -> None:
    """Print the slow patterns (and how many were timed)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--limit", type=float, default=0.2)
    ap.add_argument("--only", default="", help="only patterns whose place contains this")
    ap.add_argument("--growth", action="store_true", help="also flag quadratic growth under it")
    args = ap.parse_args()
    patterns = [f for f in all_patterns() if args.only in f.where]
    start = time.monotonic()
    slow = sweep(args.size, args.limit, patterns, verbose=True, growth=args.growth)
    for s in slow:
        print(
            f"{s.where}\n  {s.pattern[:200]!r}\n  prefix={s.prefix[:60]!r} unit={s.unit!r} "
            f"{s.seconds:.3f}s at {s.size}, {s.half_seconds:.3f}s at half, ratio {s.ratio:.1f}"
        )
    took = time.monotonic() - start
    print(f"{len(patterns)} patterns, {len(slow)} slow, {took:.1f}s")


if __name__ == "__main__":
    main()
