"""The culprit of a composed multi-host log (culprit_compose.py): the host whose own line shows
the fault or the peer its victims name, across naming conventions, delivery prefixes, numbers
of victims and where the culprit's lines stand; never a host that only timed out."""

from __future__ import annotations

import random

import pytest

from correlator.explain import explain_text
from tests.correlator.culprit_compose import (
    FAULTS,
    NAMERS,
    Composition,
    benign_beside_timeouts,
    compose,
    timeouts_only,
)
from tests.correlator.culprit_compose_more import (
    MORE_FAULTS,
    compose_more,
    smi_ecc,
    timeouts_and_teardown,
)

_CONVENTIONS = sorted(NAMERS)


def _draw(fault: str, conv: str, rng: random.Random) -> pytest.ParameterSet:
    """One composition's victims, position and seed, drawn in that order from `rng`."""
    victims = rng.choice((1, 2, 3, 5, 7))
    where = rng.choice(("first", "middle", "last"))
    seed = rng.randrange(1 << 30)
    key = f"{fault}-{conv}-{victims}v-{where}-{seed}"
    return pytest.param(fault, conv, victims, where, seed, id=key)


def _cases() -> list[pytest.ParameterSet]:
    rng = random.Random(20261128)
    return [_draw(f, c, rng) for f in sorted(FAULTS) for c in _CONVENTIONS for _ in range(2)]


def _check(got_text: Composition) -> None:
    got = explain_text(got_text.text)
    assert (got.category, got.blame) == got_text.want, got_text.text
    assert got.node == got_text.culprit, got_text.text


@pytest.mark.parametrize(("fault", "conv", "victims", "where", "seed"), _cases())
def test_the_culprit_is_the_faulty_host_however_many_hosts_timed_out_around_it(
    fault: str, conv: str, victims: int, where: str, seed: int
) -> None:
    _check(compose(fault, conv, victims, where, seed))


@pytest.mark.parametrize("conv", _CONVENTIONS)
@pytest.mark.parametrize("victims", [1, 3, 8])
def test_hosts_that_only_timed_out_name_no_culprit(conv: str, victims: int) -> None:
    _check(timeouts_only(conv, victims, seed=victims))


@pytest.mark.parametrize("conv", _CONVENTIONS)
@pytest.mark.parametrize("seed", [1, 2])
def test_a_bystanders_informational_line_makes_it_no_culprit(conv: str, seed: int) -> None:
    _check(benign_beside_timeouts(conv, 3, seed))


def test_pdsh_hosts_of_one_node_pool_with_random_suffixes_are_one_name_shape() -> None:
    # GKE's pool names end in a random 4-character suffix: each host writes one line here
    pool = "gke-prod-gpu-pool-3f1a2b9c-"
    text = (
        f"{pool}dpv7: [rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        f"{pool}ssss: [rank1]:[E301 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective"
        " operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600008 milliseconds\n"
        f"{pool}z35x: [rank2]:[E301 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective"
        " operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600008 milliseconds\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", pool + "dpv7")
    # a key: value dump of names alike is still no host
    dump = "".join(f"layer-{i}: 0.{i}\n" for i in range(1, 5))
    assert explain_text(dump + text.splitlines()[0].split(": ", 1)[1] + "\n").node is None


def _more_cases() -> list[pytest.ParameterSet]:
    # every new fault under every convention; each earlier fault under three, through the new
    # deliveries and with the victims' early lines, teardown and own torchrun tables
    rng = random.Random(20261129)
    out = []
    for fault in sorted({**FAULTS, **MORE_FAULTS}):
        convs = _CONVENTIONS if fault in MORE_FAULTS else rng.sample(_CONVENTIONS, 3)
        out.extend(_draw(fault, conv, rng) for conv in convs)
    return out


@pytest.mark.parametrize(("fault", "conv", "victims", "where", "seed"), _more_cases())
def test_the_culprit_is_found_through_every_delivery_and_the_victims_teardown(
    fault: str, conv: str, victims: int, where: str, seed: int
) -> None:
    _check(compose_more(fault, conv, victims, where, seed))


@pytest.mark.parametrize("conv", _CONVENTIONS)
@pytest.mark.parametrize("victims", [2, 6])
def test_timeouts_with_each_victims_own_abort_and_teardown_name_no_culprit(
    conv: str, victims: int
) -> None:
    _check(timeouts_and_teardown(conv, victims, seed=victims))


def test_another_hosts_line_inside_a_victims_torchrun_table_is_read_alone() -> None:
    table = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n" + "=" * 60 + "\n"
        "train.py FAILED\nRoot Cause (first observed failure):\n[0]:\n"
        "  time      : 2025-03-01_10:10:20\n  host      : gpu-03\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -6 (pid: 14750)\n"
        "  traceback : Signal 6 (SIGABRT) received by PID 14750\n" + "=" * 60
    ).split("\n")
    closed = (
        "gpu-02:2311:2390 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by "
        "remote peer gpu-07<40213>"
    )
    lines = [f"gpu-03: {ln}" for ln in table]
    for pasted in (closed, f"gpu-02: {closed}"):
        got = explain_text("\n".join([*lines[:4], pasted, *lines[4:]]) + "\n")
        assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "gpu-07")


def test_nvidia_smi_q_through_pdsh_is_read_and_names_its_host() -> None:
    watchdog = (
        "gpu-02: [rank1]:[E301 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600008 milliseconds\n"
    )
    got = explain_text(watchdog * 2 + smi_ecc("gpu-07") + "\n")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-07")
