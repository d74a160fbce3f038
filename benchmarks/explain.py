"""`fleetmedic bench explain --json`: explain's accuracy on the labelled corpus of real excerpts.

Top level (whole corpus, as before): {"n", "category_accuracy", "blame_accuracy",
"node_accuracy"}. Added: the same figures and more for each split ("training", "validation",
"validation_new_sources": validation cases whose source is not one of the original 92 cases';
"training_added_after_split": the training cases issue #11's later rounds added,
"training_added_round3" / "_round4" / "_round5" / "_round8" / "_round9" / "_round10" /
"_round11" / "_round12" / "_round13" / "_round14" / "_round15" / "_round16" / "_round17" /
"_round18" / "_round19" / "_round20" / "_round21" / "_round22" / "_round23" / "_round24" /
"_round25" / "_round26" / "_round27" / "_round28" / "_round29" / "_round30" / "_round31" /
"_round32" / "_round33" / "_round34" / "_round35" / "_round36" / "_round37" / "_round38" /
"_round39" / "_round40" / "_round41" / "_round42" / "_round43" / "_round44" / "_round45" /
"_round46": those of the third / fourth / fifth / eighth / ninth / tenth / eleventh / twelfth /
thirteenth / fourteenth / fifteenth / sixteenth / seventeenth / eighteenth / nineteenth /
twentieth / twenty-first / twenty-second / twenty-third / twenty-fourth / twenty-fifth /
twenty-sixth / twenty-seventh / twenty-eighth / twenty-ninth / thirtieth / thirty-first /
thirty-second / thirty-third / thirty-fourth / thirty-fifth / thirty-sixth / thirty-seventh /
thirty-eighth / thirty-ninth / fortieth / forty-first / forty-second / forty-third / forty-fourth /
forty-fifth / forty-sixth round alone),
"before":
the frozen figures the rules scored before issue #11 changed any rule, "round1": the
figures round one of issue #11 left (benchmarks/explain_round1.json), "round2": the figures
round two left, measured before round three changed any rule (benchmarks/explain_round2.json),
"round3": the figures round three left, measured before round four changed any rule
(benchmarks/explain_round3.json), "round4": the figures round four left, measured before
round five changed any rule (benchmarks/explain_round4.json), "round5": the figures round
five left, measured before round six changed any rule (benchmarks/explain_round5.json), and
"round7": the figures the rules at the start of round eight (main at 82874bb) scored on the
whole corpus with round eight's new cases, measured before round eight changed any rule
(benchmarks/explain_round7.json), "round8": the figures the rules round eight left (main
at 68bfc1f) scored on the training split with round nine's new training cases, measured before
any rule for them was written (benchmarks/explain_round8.json; training figures only, scored
with `--split training`, so it holds no held-out figure), "round9": the figures the rules
round nine left (main at 070e0da) scored on every split of the corpus with round ten's new
cases, measured before round ten changed any rule (benchmarks/explain_round9.json),
"round10": the figures the rules round ten left (main at 15b95fb) scored on every split of the
corpus with round eleven's new cases, measured before round eleven changed any rule
(benchmarks/explain_round10.json), "round11": the figures the rules round eleven left
(main at 9ea726b) scored on every split of the corpus with round twelve's new cases, measured
before round twelve changed any rule (benchmarks/explain_round11.json), "round12": the
figures the rules round twelve left (main at f0e5281) scored on every split of the corpus with
round thirteen's new cases, measured before round thirteen changed any rule
(benchmarks/explain_round12.json), "round13": the figures the rules round thirteen left
(main at 02b7fc8) scored on every split of the corpus with round fourteen's new cases, measured
before round fourteen changed any rule (benchmarks/explain_round13.json), "round14": the
figures the rules of main at 511c70c scored on every split of the corpus with round fifteen's
new cases, measured before round fifteen changed any rule (benchmarks/explain_round14.json),
"round15": the figures the rules of main at 0e5a9c3 scored on every split of the corpus with
round sixteen's new cases, measured before round sixteen changed any rule
(benchmarks/explain_round15.json), "round16": the figures the rules of main at 72d0bf7
scored on every split of the corpus with round seventeen's new cases, measured before round
seventeen changed any rule (benchmarks/explain_round16.json), "round17": the figures the
rules of main at 2a66319 scored on every split of the corpus with round eighteen's new cases,
measured before round eighteen changed any rule (benchmarks/explain_round17.json),
"round18": the figures the rules of main at cec95b2 scored on every split of the corpus with
round nineteen's new cases, measured before round nineteen changed any rule
(benchmarks/explain_round18.json), "round19": the figures the rules of main at 465fb60
scored on every split of the corpus with round twenty's new cases, measured before round twenty
changed any rule (benchmarks/explain_round19.json), "round20": the figures the rules of main at
083f2d7 scored on every split of the corpus with round twenty-one's new cases, measured before
round twenty-one changed any rule (benchmarks/explain_round20.json), "round21": the figures
the rules of main at 789a97c scored on every split of the corpus with round twenty-two's new
cases, measured before round twenty-two changed any rule (benchmarks/explain_round21.json),
"round22": the figures the rules of main at 3550c85 scored on every split of the corpus with round
twenty-three's new cases, measured before round twenty-three changed any rule
(benchmarks/explain_round22.json), "round23": the figures the rules of main at c28b357 scored
on every split of the corpus with round twenty-four's new cases, measured before round
twenty-four changed any rule (benchmarks/explain_round23.json), "round24": the figures the
rules of main at b0e2bca scored on every split of the corpus with round twenty-five's new cases,
measured before round twenty-five changed any rule (benchmarks/explain_round24.json),
"round25": the figures the rules of main at 8f70ae2 scored on every split of the corpus with round
twenty-six's new cases, measured before round twenty-six changed any rule
(benchmarks/explain_round25.json), "round26": the figures the rules of main at 5e02cda scored
on every split of the corpus with round twenty-seven's new cases, measured before round
twenty-seven changed any rule (benchmarks/explain_round26.json), "round27": the figures the
rules of main at 7f1532b scored on every split of the corpus with round twenty-eight's new cases,
measured before round twenty-eight changed any rule (benchmarks/explain_round27.json),
"round28": the figures the rules of main at b710e09 scored on every split of the corpus with
round twenty-nine's new cases, measured before round twenty-nine changed any rule
(benchmarks/explain_round28.json), "round29": the figures the rules of main at 2f7f3d3
scored on every split of the corpus with round thirty's new cases, measured before round thirty
changed any rule (benchmarks/explain_round29.json), "round30": the figures the rules of main
at 08027c4 scored on every split of the corpus with round thirty-one's new cases, measured before
round thirty-one changed any rule (benchmarks/explain_round30.json), "round31": the figures the
rules of main at e520538 scored on every split of the corpus with round thirty-two's new cases,
measured before round thirty-two changed any rule (benchmarks/explain_round31.json),
"round32": the figures the rules of main at 01bc83c scored on every split of the corpus with
round thirty-three's new cases, measured before round thirty-three changed any rule
(benchmarks/explain_round32.json), "round33": the figures the rules of main at 11b9ae7
scored on every split of the corpus with round thirty-four's new cases, measured before round
thirty-four changed any rule (benchmarks/explain_round33.json), "round34": the figures the
rules of main at fdba9fd scored on every split of the corpus with round thirty-five's new cases,
measured before round thirty-five changed any rule (benchmarks/explain_round34.json),
"round35": the figures the rules of main at d6437b2 scored on every split of the corpus with round
thirty-six's new cases, measured before round thirty-six changed any rule
(benchmarks/explain_round35.json), "round36": the figures the rules of main at bf5e1f9 scored
on every split of the corpus with round thirty-seven's new cases, measured before round
thirty-seven changed any rule (benchmarks/explain_round36.json), "round37": the figures the
rules of main at 2dfb24e scored on every split of the corpus with round thirty-eight's new cases,
measured before round thirty-eight changed any rule (benchmarks/explain_round37.json),
"round38": the figures the rules of main at 43e269d scored on every split of the corpus with round
thirty-nine's new cases, measured before round thirty-nine changed any rule
(benchmarks/explain_round38.json), "round39": the figures the rules of main at 177c3d1 scored
on every split of the corpus with round forty's new cases, measured before round forty changed
any rule (benchmarks/explain_round39.json), "round40": the figures the rules of main at
f858b7d scored on every split of the corpus with round forty-one's new cases, measured before
round forty-one changed any rule (benchmarks/explain_round40.json), "round41": the figures
the rules of main at 6d65ff0 scored on every split of the corpus with round forty-two's new
cases, measured before round forty-two changed any rule (benchmarks/explain_round41.json),
"round42": the figures the rules of main at ace8fa2 scored on every split of the corpus with
round forty-three's new cases, measured before round forty-three changed any rule
(benchmarks/explain_round42.json), "round43": the figures the rules of main at 48533c6
scored on every split of the corpus with round forty-four's new cases, measured before round
forty-four changed any rule (benchmarks/explain_round43.json), "round44": the figures the
rules of main at 381f4a6 scored on every split of the corpus with round forty-five's new
cases, measured before round forty-five changed any rule (benchmarks/explain_round44.json), and
"round45": the figures the rules of main at 10a55c1 scored on every split of the corpus with
round forty-six's new cases, measured before round forty-six changed any rule
(benchmarks/explain_round45.json).
"validation_3": a second held-out split gathered in round three from sources no other case
uses, labelled and scored with round two's rules before any rule of round three was written;
"validation_4": a third one, gathered in round eight from sources no other case uses, labelled
and scored with the rules of 82874bb before any rule of round eight was written;
"validation_5": a fourth one, gathered in round ten from sources no other case uses, labelled
and scored with the rules of 070e0da before any rule of round ten was written;
"validation_6": a fifth one, gathered in round eleven from sources no other case uses, labelled
and scored with the rules of 15b95fb before any rule of round eleven was written;
"validation_7": a sixth one, gathered in round twelve from sources no other case uses, labelled
and scored with the rules of 9ea726b before any rule of round twelve was written;
"validation_8": a seventh one, gathered in round thirteen from sources no other case uses,
labelled and scored with the rules of f0e5281 before any rule of round thirteen was written;
"validation_9": an eighth one, gathered in round fourteen from sources no other case uses,
labelled and scored with the rules of 02b7fc8 before any rule of round fourteen was written;
"validation_10": a ninth one, gathered in round fifteen from sources no other case uses,
labelled and scored with the rules of 511c70c before any rule of round fifteen was written;
"validation_11": a tenth one, gathered in round sixteen from sources no other case uses,
labelled and scored with the rules of 0e5a9c3 before any rule of round sixteen was written;
"validation_12": an eleventh one, gathered in round seventeen from sources no other case uses,
labelled and scored with the rules of 72d0bf7 before any rule of round seventeen was written;
"validation_13": a twelfth one, gathered in round eighteen from sources no other case uses,
labelled and scored with the rules of 2a66319 before any rule of round eighteen was written;
"validation_14": a thirteenth one, gathered in round nineteen from sources no other case uses,
labelled and scored with the rules of cec95b2 before any rule of round nineteen was written;
"validation_15": a fourteenth one, gathered in round twenty from sources no other case uses,
labelled and scored with the rules of 465fb60 before any rule of round twenty was written;
"validation_16": a fifteenth one, gathered in round twenty-one from sources no other case uses,
labelled and scored with the rules of 083f2d7 before any rule of round twenty-one was written;
"validation_17": a sixteenth one, gathered in round twenty-two from sources no other case uses,
labelled and scored with the rules of 789a97c before any rule of round twenty-two was written;
"validation_18": a seventeenth one, gathered in round twenty-three from sources no other case
uses, labelled and scored with the rules of 3550c85 before any rule of round twenty-three was
written; "validation_19": an eighteenth one, gathered in round twenty-four from sources no other
case uses, labelled and scored with the rules of c28b357 before any rule of round twenty-four was
written; "validation_20": a nineteenth one, gathered in round twenty-five from sources no other
case uses, labelled and scored with the rules of b0e2bca before any rule of round twenty-five was
written; "validation_21": a twentieth one, gathered in round twenty-six from sources no other
case uses, labelled and scored with the rules of 8f70ae2 before any rule of round twenty-six was
written; "validation_22": a twenty-first one, gathered in round twenty-seven from sources no other
case uses, labelled and scored with the rules of 5e02cda before any rule of round twenty-seven
was written; "validation_23": a twenty-second one, gathered in round twenty-eight from sources no
other case uses, labelled and scored with the rules of 7f1532b before any rule of round
twenty-eight was written; "validation_24": a twenty-third one, gathered in round twenty-nine from
sources no other case uses, labelled and scored with the rules of b710e09 before any rule of
round twenty-nine was written; "validation_25": a twenty-fourth one, gathered in round thirty
from sources no other case uses, labelled and scored with the rules of 2f7f3d3 before any rule
of round thirty was written; "validation_26": a twenty-fifth one, gathered in round thirty-one
from sources no other case uses, labelled and scored with the rules of 08027c4 before any rule of
round thirty-one was written; "validation_27": a twenty-sixth one, gathered in round thirty-two
from sources no other case uses, labelled and scored with the rules of e520538 before any rule of
round thirty-two was written; "validation_28": a twenty-seventh one, gathered in round
thirty-three from sources no other case uses, labelled and scored with the rules of 01bc83c before
any rule of round thirty-three was written; "validation_29": a twenty-eighth one, gathered in
round thirty-four from sources no other case uses, labelled and scored with the rules of 11b9ae7
before any rule of round thirty-four was written; "validation_30": a twenty-ninth one, gathered in
round thirty-five from sources no other case uses, labelled and scored with the rules of fdba9fd
before any rule of round thirty-five was written; "validation_31": a thirtieth one, gathered in
round thirty-six from sources no other case uses, labelled and scored with the rules of d6437b2
before any rule of round thirty-six was written; "validation_32": a thirty-first one, gathered in
round thirty-seven from sources no other case uses, labelled and scored with the rules of bf5e1f9
before any rule of round thirty-seven was written; "validation_33": a thirty-second one, gathered
in round thirty-eight from sources no other case uses, labelled and scored with the rules of
2dfb24e before any rule of round thirty-eight was written; "validation_34": a thirty-third one,
gathered in round thirty-nine from sources no other case uses, labelled and scored with the rules
of 43e269d before any rule of round thirty-nine was written; "validation_35": a thirty-fourth
one, gathered in round forty from sources no other case uses, labelled and scored with the rules
of 177c3d1 before any rule of round forty was written; "validation_36": a thirty-fifth one,
gathered in round forty-one from sources no other case uses, labelled and scored with the rules
of f858b7d before any rule of round forty-one was written; "validation_37": a thirty-sixth one,
gathered in round forty-two from sources no other case uses, labelled and scored with the rules
of 6d65ff0 before any rule of round forty-two was written; "validation_38": a thirty-seventh one,
gathered in round forty-three from sources no other case uses, labelled and scored with the rules
of ace8fa2 before any rule of round forty-three was written; "validation_39": a thirty-eighth one,
gathered in round forty-four from sources no other case uses, labelled and scored with the rules
of 48533c6 before any rule of round forty-four was written; "validation_40": a thirty-ninth one,
gathered in round forty-five from sources no other case uses, labelled and scored with the rules
of 381f4a6 before any rule of round forty-five was written; "validation_41": a fortieth one,
gathered in round forty-six from sources no other case uses, labelled and scored with the rules
of 10a55c1 before any rule of round forty-six was written.

Per split: culprit_accuracy (the node, over cases whose label names one), culprit_missed_unnamed
and culprit_missed_other (of those, the cases explain named no node for / named another node
for), culprit_missed_unrecognised (of the unnamed, those where explain recognised nothing at
all), culprit_unwarranted (cases with a failure whose label names no node, where explain named
one: a host the text does not single out), nothing_recognised_rate
(cases with a failure to explain where explain recognised nothing), node_blame_on_user_or_oom
(cases whose truth is the job's code or memory but explain blamed the node). A case's documented
`alternative` reading counts as a hit, as in the per-case corpus test. `--corpus DIR` points at
another corpus laid out the same way; `--split training` scores one split only (work on rules
never needs the validation split run); `--misses` lists the training cases that missed (the
held-out splits' cases are never listed: they measure rules nobody tuned on them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from correlator.explain import explain_bytes

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "corpus"
_HERE = Path(__file__).resolve().parent
# The figures frozen before issue #11 changed any rule, then each round's (round six froze none):
# key "roundN" reads benchmarks/explain_roundN.json.
_FROZEN = (
    ("before", _HERE / "explain_before.json"),
    *((f"round{i}", _HERE / f"explain_round{i}.json") for i in (1, 2, 3, 4, 5, *range(7, 46))),
)
# the held-out splits in the order they were drawn (there is no validation_2: the second one,
# gathered in round three, is validation_3)
_HELD_OUT = ("validation", *(f"validation_{i}" for i in range(3, 42)))
_SPLITS = ("training", *_HELD_OUT)
_JOB_TRUTH = {"user_code", "oom_host", "oom_gpu"}


def _same_node(got: str | None, want: str | None) -> bool:
    if got is None or want is None:
        return got is want
    return got.lower() == want.lower()


def _readings(case: dict[str, Any]) -> list[tuple[str | None, str]]:
    wanted = [(case["category"], case["blame"])]
    if "alternative" in case:
        wanted.append((case["alternative"]["category"], case["alternative"]["blame"]))
    return wanted


def score_case(case: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """One case's outcome: which fields hit, and the two failure flags the bench counts."""
    readings = _readings(case)
    return {
        "category": got["category"] in {c for c, _ in readings},
        "blame": got["blame"] in {b for _, b in readings},
        "node": _same_node(got["node"], case["node"]),
        "named": case["node"] is not None,
        "named_got": got["node"] is not None,
        "to_explain": case["category"] is not None,
        "unrecognised": case["category"] is not None and got["category"] is None,
        "node_blame_on_job": (
            case["category"] in _JOB_TRUTH
            and got["blame"] == "node"
            and all(b != "node" for _, b in readings)
        ),
    }


def _rate(hits: int, n: int) -> float:
    return round(hits / n, 4) if n else 0.0


def figures_of(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy figures over a list of case outcomes."""
    n = len(outcomes)
    named = [o for o in outcomes if o["named"]]
    to_explain = sum(o["to_explain"] for o in outcomes)
    return {
        "n": n,
        "category_accuracy": _rate(sum(o["category"] for o in outcomes), n),
        "blame_accuracy": _rate(sum(o["blame"] for o in outcomes), n),
        "node_accuracy": _rate(sum(o["node"] for o in outcomes), n),
        "culprit_named": len(named),
        "culprit_accuracy": _rate(sum(o["node"] for o in named), len(named)),
        # How the named culprits were missed, and how often a host was named that the text does
        # not single out: a wrong host is worse than none (the healer drains what is named).
        "culprit_missed_unnamed": sum(not o["node"] and not o["named_got"] for o in named),
        "culprit_missed_other": sum(not o["node"] and o["named_got"] for o in named),
        "culprit_missed_unrecognised": sum(not o["node"] and o["unrecognised"] for o in named),
        "culprit_unwarranted": sum(
            o["to_explain"] and not o["named"] and o["named_got"] for o in outcomes
        ),
        "nothing_recognised_rate": _rate(sum(o["unrecognised"] for o in outcomes), to_explain),
        "node_blame_on_user_or_oom": sum(o["node_blame_on_job"] for o in outcomes),
    }


def _original_sources(labels: list[dict[str, Any]]) -> set[str]:
    return {c["source"] for c in labels if c.get("original")}


# The training rounds a case may be marked with ("round3": true ...), each reported apart.
_ROUNDS = tuple(f"round{i}" for i in (3, 4, 5, *range(8, 47)))
# The groups reported, in this order, when they have cases.
_GROUPS = (
    "training",
    "training_added_after_split",
    *(f"training_added_{r}" for r in _ROUNDS),
    "validation",
    "validation_new_sources",
    *_HELD_OUT[1:],
)


def _groups_of(case: dict[str, Any], old_sources: set[str]) -> list[str]:
    """The groups a case's outcome counts in."""
    split = case.get("split", "training")
    keys = ["all", split]
    if split == "validation" and case["source"] not in old_sources:
        keys.append("validation_new_sources")
    if case.get("added_after_split"):
        keys.append("training_added_after_split")
    keys += [f"training_added_{r}" for r in _ROUNDS if case.get(r)]
    return keys


def _miss(case: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    fields = ("category", "blame", "node")
    return {
        "file": case["file"],
        "split": case.get("split", "training"),
        "want": {k: case[k] for k in fields},
        "got": {k: got[k] for k in fields},
    }


def evaluate(corpus: Path, only: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Figures over a corpus (whole and per split, or one split) and the training cases that
    missed on any field."""
    labels = json.loads((corpus / "labels.json").read_text("utf-8"))
    old_sources = _original_sources(labels)
    groups: dict[str, list[dict[str, Any]]] = {"all": []}
    misses: list[dict[str, Any]] = []
    for case in labels:
        split = case.get("split", "training")
        if only is not None and split != only:
            continue
        got = explain_bytes((corpus / case["file"]).read_bytes()).to_dict()
        outcome = score_case(case, got)
        for key in _groups_of(case, old_sources):
            groups.setdefault(key, []).append(outcome)
        if split == "training" and not (
            outcome["category"] and outcome["blame"] and outcome["node"]
        ):
            misses.append(_miss(case, got))
    whole = figures_of(groups.pop("all"))
    figures: dict[str, Any] = {k: whole[k] for k in _TOP_KEYS}
    figures.update({key: figures_of(groups[key]) for key in _GROUPS if key in groups})
    return figures, misses


_TOP_KEYS = ("n", "category_accuracy", "blame_accuracy", "node_accuracy")


def run(argv: list[str]) -> dict[str, Any]:
    """Benchmark entry point for `fleetmedic bench explain`."""
    parser = argparse.ArgumentParser(prog="fleetmedic bench explain")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--split", choices=_SPLITS, help="score only this split")
    parser.add_argument(
        "--misses", action="store_true", help="also list the training cases that missed"
    )
    args = parser.parse_args(argv)
    figures, misses = evaluate(args.corpus, args.split)
    if args.corpus == DEFAULT_CORPUS and args.split is None:
        for key, path in _FROZEN:
            if path.exists():
                figures[key] = json.loads(path.read_text("utf-8"))
    if args.misses:
        figures["misses"] = misses
    return figures
