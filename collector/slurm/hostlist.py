"""Small pure helpers for Slurm's compact notations: hostlists, index ranges, TRES strings."""

from __future__ import annotations

import itertools
import re

_MAX_HOSTS = 100_000  # a typo like node[1-999999999] must not eat the server's memory


class HostlistError(ValueError):
    """A hostlist or index range that cannot be expanded."""


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in {text!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _expand_range_list(body: str) -> list[str]:
    """'1-3,05' -> ['1', '2', '3', '05'], keeping zero padding like Slurm does."""
    out: list[str] = []
    for item in body.split(","):
        item = item.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not m:
            raise HostlistError(f"bad range {item!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise HostlistError(f"descending range {item!r}")
        if int(hi) - int(lo) + len(out) > _MAX_HOSTS:
            raise HostlistError(f"range too large {item!r}")
        width = len(lo) if lo.startswith("0") else 0
        out.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return out


def expand_hostlist(text: str | None) -> list[str]:
    """Expand a Slurm hostlist ('node[1-3,5],gpu-[01-02]x') into host names, in order."""
    # sacct says 'None assigned' for a job that has not started.
    if not text or text.strip() in ("", "(null)", "None", "N/A", "None assigned"):
        return []
    hosts: list[str] = []
    for part in _split_top(text.strip()):
        # Linear: _split_top has already refused any '[' left open, so each bracket scan
        # stops at its own ']' (an unclosed run of '[' would make this split quadratic).
        pieces = re.split(r"(\[[^\]]*\])", part)
        choices = [
            _expand_range_list(p[1:-1]) if p.startswith("[") else [p] for p in pieces if p != ""
        ]
        for combo in itertools.product(*choices):
            hosts.append("".join(combo))
            if len(hosts) > _MAX_HOSTS:
                raise HostlistError("hostlist too large")
    return hosts


def expand_indices(text: str) -> list[int]:
    """Expand a GRES index list ('0-1,4' or '2,4-6') into integers."""
    text = text.strip()
    if not text:
        return []
    return [int(x) for x in _expand_range_list(text)]


def parse_tres(text: str | None) -> dict[str, str]:
    """'billing=1,cpu=1,gres/gpu=2,node=1' -> {'billing': '1', 'cpu': '1', 'gres/gpu': '2', ...}."""
    out: dict[str, str] = {}
    if not text:
        return out
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def gpu_count_from_tres(tres: dict[str, str]) -> int | None:
    """GPUs in a TRES dict: 'gres/gpu' when present, else the sum of typed 'gres/gpu:TYPE'."""
    if "gres/gpu" in tres:
        return _int_or_none(tres["gres/gpu"])
    typed = [_int_or_none(v) for k, v in tres.items() if k.startswith("gres/gpu:")]
    vals = [v for v in typed if v is not None]
    return sum(vals) if vals else None


_GRES_ITEM = re.compile(r"gpu(?::[^:(,]+)?:(\d+)(?:\(IDX:([^)]*)\))?")


def gpu_indices_from_gres(text: str | None) -> list[int] | None:
    """GPU indices in a GRES string such as 'gpu:2(IDX:0-1)' or 'gpu:a100:4(IDX:0,2-3)'.

    None when the string names GPUs but no IDX (nothing to attribute); [] when no GPUs at all.
    """
    if not text:
        return []
    found: list[int] = []
    saw_gpu_without_idx = False
    for m in _GRES_ITEM.finditer(text):
        if m.group(2) is None:
            saw_gpu_without_idx = True
        elif m.group(2).strip() not in ("", "N/A"):
            found.extend(expand_indices(m.group(2)))
    if not found and saw_gpu_without_idx:
        return None
    return sorted(set(found))


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
