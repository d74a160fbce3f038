"""Metamorphic: benign warnings a healthy GPU run prints must not read as, or outrank, the fault.

Real logs carry deprecation notices (TypedStorage, torch.cuda.amp), launcher notes (torchrun's
OMP_NUM_THREADS, elastic's redirects note, srun's queue lines, ssh's known-hosts line), library
notices (tokenizers' fork warning, transformers' newly initialized weights, DeepSpeed's libaio
probe), NCCL's plugin and transport probes on a socket-only host, the CUDA images' banner and
PyTorch's exit warning about an undestroyed process group. Each training case explain gets right
(the open rounds' and known misses left out, the cases with nothing to explain kept: they must
stay "nothing") gets 2-4 of them where paragraphs start (tests/correlator/benign_lines.py, each
message worded as its emitter's source writes it), and must keep its category, blame and
culprit. Each message alone, and all of them together, must give no verdict. Only training
cases are read here; their texts are never printed (ids are file names).
"""

from __future__ import annotations

import random
import re
from functools import cache
from typing import Any

import pytest

from correlator.explain import explain_text
from tests.correlator.benign_lines import BENIGN, eligible, filled, with_benign
from tests.correlator.corpus_open import KNOWN_TRAINING_MISSES, OPEN_ROUNDS
from tests.correlator.host_rename import token
from tests.correlator.test_explain_corpus import CORPUS, TRAINING

# a metamorphic test of a wrong verdict would freeze the error: the misses are left out
CHECKED = [
    c for c in TRAINING if c["file"] not in KNOWN_TRAINING_MISSES and c["file"] not in OPEN_ROUNDS
]

# case files whose verdict still moves among benign lines, each with the reason
SKIPPED: dict[str, str] = {}


@cache
def _text(file: str) -> str:
    return (CORPUS / file).read_text("utf-8")


def _verdict(text: str) -> tuple[Any, Any, Any]:
    got = explain_text(text)
    return got.category, got.blame, (got.node or "").lower() or None


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c["file"],
            marks=[pytest.mark.skip(reason=SKIPPED[c["file"]])] if c["file"] in SKIPPED else [],
        )
        for c in CHECKED
    ],
)
def test_benign_warnings_keep_the_training_verdict(case: dict[str, Any]) -> None:
    text = _text(case["file"])
    before = _verdict(text)
    assert before[0] == case["category"] or "alternative" in case  # right before the distractors
    assert _verdict(with_benign(text, case["file"], case["node"])) == before


def test_every_case_gets_benign_messages_between_paragraphs_and_keeps_its_lines() -> None:
    # booleans only: a failing assert must not print the text
    for case in CHECKED:
        text = _text(case["file"])
        out = with_benign(text, case["file"], case["node"])
        kept = iter(out.splitlines())
        assert all(any(ln == got for got in kept) for ln in text.splitlines()), case["file"]
        assert len(out.splitlines()) >= len(text.splitlines()) + 2, case["file"]
        if case["node"]:  # a host-naming message names another host of the job
            culprit = re.compile(token(case["node"]), re.I)
            assert len(culprit.findall(out)) == len(culprit.findall(text)), case["file"]


# messages a rule recognises on purpose as no failure (so that a family's catch-all does not
# read them as a fault): they give no category, blame or node, and say so at the lowest
# confidence; every other message is not recognised at all
READ_AS_NO_FAILURE = {
    # nccl.json nccl_plugin_fallback: "NET/Plugin : No plugin found, using internal
    # implementation" is NCCL using its own transports, kept from NCCL's catch-all
    "nccl_socket_transport_v2_18",
}


def _no_verdict(text: str, recognised: bool) -> bool:
    got = explain_text(text)
    none = got.category is None and got.blame == "unknown" and got.node is None
    if recognised:
        return none and 0.0 < got.confidence <= 0.1 and "not an error" in got.explanation
    return none and got.confidence == 0.0 and not got.evidence


@pytest.mark.parametrize("benign", BENIGN, ids=[b.name for b in BENIGN])
def test_each_benign_message_alone_gives_no_verdict(benign: Any) -> None:
    text = "\n".join(filled(benign, "gpu-node-07", random.Random(7))) + "\n"
    assert _no_verdict(text, benign.name in READ_AS_NO_FAILURE)


def test_all_benign_messages_together_give_no_verdict() -> None:
    rng = random.Random(11)
    text = "\n\n".join("\n".join(filled(b, "gpu-node-07", rng)) for b in BENIGN) + "\n"
    assert _no_verdict(text, bool(READ_AS_NO_FAILURE))


def test_host_naming_and_socket_messages_go_only_where_they_fit() -> None:
    names = {b.name for b in eligible("a plain traceback", None)}
    assert not names & {b.name for b in BENIGN if b.names_host}
    on_ib = {b.name for b in eligible("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB", "gpu004")}
    assert not on_ib & {b.name for b in BENIGN if b.socket_only}
    assert {b.name for b in BENIGN} == {b.name for b in eligible("plain", "gpu004")}


@pytest.mark.parametrize(
    "notice",
    [
        "NET/Plugin : No plugin found, using internal implementation",  # read as no failure
        "NET/IB : No device found.",  # NET/IB's init on a host without an RDMA device
    ],
)
def test_a_host_seen_only_in_nccl_transport_probes_is_no_suspect(notice: str) -> None:
    # another rank's NCCL init on gpu114 beside the failing prompt's host gpu004
    text = (
        f"gpu114:4242:4300 [0] NCCL INFO {notice}\n\n[alice@gpu004 run]$ python train.py\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert _verdict(text) == ("user_code", "job", "gpu004")
