"""Probes for the explain rules built from the emitters' own format strings (issue #11).

A probe is one format string of one emitter (its repository, path and commit cited), the values
that emitter can really put into it (errno texts from strerror, ibv_wc_status names, hostnames of
several conventions, IPv4 and IPv6 peers in the form the emitter prints them, ranks, sizes,
signal names) and the verdict its rule family documents. Each format is instantiated with
several value sets, so a rule that only matches the values some sample had fails here.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from correlator.explain import explain_text

NCCL_COMMIT = "5067397c2676d5aed50042fc39e5c8ee96eb0027"
SLURM_COMMIT = "284c3b95f08a2dc2478499837b03355e1b9c5c75"

# Hostnames of several conventions: NCCL's prefix cuts gethostname() at its first '.'
# (src/misc/utils.cc getHostName(hostname, 1024, '.')), so these are short names.
HOSTS = (
    "gpu-a-07",
    "node0123",
    "dgx-h100-031",
    "ip-10-1-2-3",
    "nid001234",
    "compute-1-17",
    "a100x8-12",
    "GPU-NODE-44",
)


def strerror(name: str) -> str:
    """glibc's strerror text for the errno called `name` (what the C emitters print)."""
    return os.strerror(getattr(errno, name))


@dataclass(frozen=True)
class Fmt:
    """One emitter format: where it is, how to fill it, and what it must read as."""

    key: str
    source: str  # repo path @commit (or URL) of the format string
    template: str  # str.format template of the line(s) as the emitter writes them
    values: Mapping[str, Sequence[Any]]  # each placeholder's values, spread over the probes
    want: tuple[str | None, str]  # (category, blame) the family documents
    culprit: str | None = None  # the placeholder whose value is the node to blame, if any
    prefixes: tuple[str, ...] = ("",)  # the emitter's line prefixes (templates), in turn


def spread(values: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """As many value sets as the longest axis has values; every value is used at least once."""
    n = max((len(v) for v in values.values() if v), default=1)
    return [{k: v[i % len(v)] for k, v in values.items()} for i in range(n)]


def params(formats: Sequence[Fmt]) -> list[Any]:
    """One pytest param per instantiated line: (format, its text, the expected culprit)."""
    return list(_expand(formats))


def _expand(formats: Sequence[Fmt]) -> Iterator[Any]:
    for f in formats:
        for i, subs in enumerate(spread({**f.values, "prefix": f.prefixes})):
            shown = {k: printed(v) for k, v in subs.items()}
            text = shown["prefix"].format(**shown) + f.template.format(**shown)
            node = _culprit(subs[f.culprit]) if f.culprit else None
            yield pytest.param(f, text, node, id=f"{f.key}-{i}")


def _culprit(value: Any) -> str:
    # a peer axis holds (as printed, the host it names); a host axis the host itself
    return str(value[1] if isinstance(value, tuple) else value)


def printed(value: Any) -> str:
    """A peer as the emitter prints it (the first of a (printed, host) pair)."""
    return str(value[0] if isinstance(value, tuple) else value)


def check(f: Fmt, text: str, node: str | None) -> None:
    """Assert that explain reads `text` as the family documents (and names `node` if given)."""
    got = explain_text(text)
    assert (got.category, got.blame) == f.want, (f.source, text, got.explanation)
    if f.culprit:
        assert got.node == node, (f.source, text, got.node, got.explanation)


# --- NCCL: src/debug.cc prefixes, ncclSocketToString peers ---------------------------------

# debug.cc's two WARN prefixes (with and without the calling function)
_PREFIXES = (
    "{host}:{pid}:{tid} [{dev}] {file}:{line} ({func}) NCCL WARN ",
    "{host}:{pid}:{tid} [{dev}] NCCL WARN ",
)
# (as ncclSocketToString prints it, the host it names)
PEERS = (
    ("10.4.0.17<45678>", "10.4.0.17"),
    ("192.168.100.5<38221>", "192.168.100.5"),
    ("172.31.12.9<60001>", "172.31.12.9"),
    ("2001:db8:12::17<43117>", "2001:db8:12::17"),
    ("fd42:1:2:3::9<50123>", "fd42:1:2:3::9"),
    ("::ffff:10.4.0.21<43117>", "10.4.0.21"),
)
# socketProgress passes numericHostForm 0: getnameinfo resolves the peer's name when it can
NAMED_PEERS = (
    ("gpu-b-03<43117>", "gpu-b-03"),
    ("node0412.cluster.example.org<50123>", "node0412.cluster.example.org"),
    *PEERS[:4],
)
NET = ("interconnect", "unknown")
IB = ("interconnect", "infra")


def errnos(*names: str) -> tuple[str, ...]:
    """strerror's texts for the errnos called `names`."""
    return tuple(strerror(n) for n in names)


def nccl_prefix_values(src: str, lines: tuple[int, ...]) -> dict[str, Sequence[Any]]:
    """Values of NCCL's "host:pid:tid [dev] file:line" prefix for a format of `src`."""
    return {
        "host": HOSTS,
        "pid": (3117, 902211, 48),
        "tid": (3190, 902377, 61),
        "dev": (0, 3, 7),
        "file": (src.removeprefix("src/"),),
        "line": lines,
    }


def warn(
    key: str,
    src: str,
    func: str,
    body: str,
    want: tuple[str | None, str],
    culprit: str | None = None,
    **values: Sequence[Any],
) -> Fmt:
    """A WARN format of `src` logged from `func`, behind debug.cc's prefixes."""
    return Fmt(
        key=key,
        source=f"NVIDIA/nccl {src}@{NCCL_COMMIT[:10]}",
        template=body + "\n",
        values={**nccl_prefix_values(src, (288, 1905, 42)), "func": (func,), **values},
        want=want,
        culprit=culprit,
        prefixes=_PREFIXES,
    )
