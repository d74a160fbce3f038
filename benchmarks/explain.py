"""`fleetmedic bench explain --json`: explain's accuracy on the labelled corpus of real excerpts.

Prints {"n", "category_accuracy", "blame_accuracy", "node_accuracy"}; `--corpus DIR` points at
another corpus laid out the same way (labels.json + the excerpt files), `--misses` lists misses.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from correlator.explain import explain_bytes

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "corpus"


def _same_node(got: str | None, want: str | None) -> bool:
    if got is None or want is None:
        return got is want
    return got.lower() == want.lower()


def evaluate(corpus: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Accuracy figures over a corpus and the list of cases that missed on any field."""
    labels = json.loads((corpus / "labels.json").read_text("utf-8"))
    hits = {"category": 0, "blame": 0, "node": 0}
    misses: list[dict[str, Any]] = []
    for case in labels:
        got = explain_bytes((corpus / case["file"]).read_bytes()).to_dict()
        ok = {
            "category": got["category"] == case["category"],
            "blame": got["blame"] == case["blame"],
            "node": _same_node(got["node"], case["node"]),
        }
        for key, good in ok.items():
            hits[key] += int(good)
        if not all(ok.values()):
            misses.append(
                {
                    "file": case["file"],
                    "want": {k: case[k] for k in ok},
                    "got": {k: got[k] for k in ok},
                }
            )
    n = len(labels)
    figures: dict[str, Any] = {
        "n": n,
        "category_accuracy": round(hits["category"] / n, 4) if n else 0.0,
        "blame_accuracy": round(hits["blame"] / n, 4) if n else 0.0,
        "node_accuracy": round(hits["node"] / n, 4) if n else 0.0,
    }
    return figures, misses


def run(argv: list[str]) -> dict[str, Any]:
    """Benchmark entry point for `fleetmedic bench explain`."""
    parser = argparse.ArgumentParser(prog="fleetmedic bench explain")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--misses", action="store_true", help="also list the cases that missed")
    args = parser.parse_args(argv)
    figures, misses = evaluate(args.corpus)
    if args.misses:
        figures["misses"] = misses
    return figures
