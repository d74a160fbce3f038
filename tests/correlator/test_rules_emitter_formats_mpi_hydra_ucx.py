"""MPICH Hydra's and UCX's reports from their own formats, with the culprit host (probe set seven,
the launcher half in test_rules_emitter_formats_mpi.py, whose docstring cites each format).

Formats: pmodels/mpich src/pm/hydra @6a79bf6575 (mpiexec/pmiserv_cb.c's BAD TERMINATION block,
lib/hydra.h HYDU_error_printf and HYDU_ASSERT, proxy/pmip_cb.c, bscu_wait.c; Intel MPI's Hydra
"RANK %d PID %d RUNNING AT %s" / "KILLED BY SIGNAL: %d (%s)" as mpi.json documents it); openucx/ucx
@9466d104a3 (ucs/debug/debug.c, ucs/debug/log.c, uct/ib/mlx5/ib_mlx5_log.c, ucp/core/ucp_ep.c,
ucs/type/status.c, ucs/sys/sock.c).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params
from tests.correlator.test_rules_emitter_formats_mpi import (
    IB,
    NET,
    OOM_HOST,
    PIDL5,
    PIDS,
    RANK_TAGS,
    RANKS,
    SIGNALS,
    USER,
)

HYDRA = "pmodels/mpich src/pm/hydra mpiexec/pmiserv_cb.c@6a79bf6575"
UCX = "openucx/ucx src/ucs/debug/debug.c, log.c@9466d104a3"
UCT = "openucx/ucx src/uct/ib/mlx5/ib_mlx5_log.c, ucs/type/status.c@9466d104a3"


def _hydra_block(lines: tuple[str, ...]) -> str:
    bar = "=" * 82
    return "\n" + bar + "\n" + "\n".join(lines) + "\n" + bar + "\n"


HYDRA_FMTS = [
    *[
        Fmt(
            f"hydra-exit-code-{code}",
            HYDRA,
            _hydra_block(
                (
                    "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
                    "=   PID {pid} RUNNING AT {host}",
                    f"=   EXIT CODE: {code}",
                    "=   CLEANING UP REMAINING PROCESSES",
                    "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
                )
            ),
            {"host": HOSTS, "pid": PIDS},
            want,
            "host",
        )
        for code, want in ((9, OOM_HOST), (139, USER), (134, USER), (11, USER), (6, USER))
    ],
    *[
        Fmt(
            f"impi-killed-{sig}",
            "Intel MPI Hydra (mpi.json mpich_killed_by_signal)",
            _hydra_block(
                (
                    "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
                    "=   RANK {rank} PID {pid} RUNNING AT {host}",
                    f"=   KILLED BY SIGNAL: {sig} ({name})",
                )
            ),
            {"host": HOSTS, "pid": PIDS, "rank": RANKS},
            want,
            "host",
        )
        for sig, name, want in SIGNALS
    ],
]

UCX_FMTS = [
    Fmt(
        f"ucx-caught-{sig}",
        UCX,
        "{tag}[{host}:{pidl}:0:{pid}] Caught signal " + f"{sig} ({name}: {cause})\n"
        "{tag}==== backtrace (tid:{pid}) ====\n",
        {"host": HOSTS, "pid": PIDS, "pidl": PIDL5, "tag": RANK_TAGS},
        want,
        "host",
    )
    for sig, name, cause, want in (
        (11, "Segmentation fault", "address not mapped to object at address 0x10", USER),
        (11, "Segmentation fault", "invalid permissions for mapped object at address 0x7f3a", USER),
        (7, "Bus error", "nonexistent physical address", OOM_HOST),
        (8, "Floating point exception", "integer divide by zero", USER),
        (4, "Illegal instruction", "illegal opcode", USER),
    )
]
_UCX_LOG = "{tag}[{stamp}] [{host}:{pidl}:0] {file:>17}:{line:<4} UCX  ERROR "
UCX_LOG_FMTS = [
    Fmt(
        f"uct-ib-{key}",
        UCT,
        _UCX_LOG + what + " on {dev}:1/{tl} (synd {synd} vend 0x81 hw_synd 0/0)\n"
        "{tag}[{stamp}] [{host}:{pidl}:0] {file:>17}:{line:<4} UCX  ERROR RC QP 0x1e3f "
        "wqe[{line}]: SEND s-e [inl len 26]\n",
        {
            "host": HOSTS,
            "pid": PIDS,
            "pidl": PIDL5,
            "tag": RANK_TAGS,
            "stamp": ("1762045780.123456", "1700000000.000001"),
            "file": ("ib_mlx5_log.c",),
            "line": (143, 162, 177),
            "dev": ("mlx5_0", "mlx5_3", "mlx5_bond_0"),
            "tl": ("IB", "RoCE"),
            "synd": ("0x15", "0x4"),
        },
        IB,
        "host",
    )
    for key, what in (
        ("retry", "Transport retry count exceeded"),
        ("remote-access", "Remote access error"),
        ("rnr", "Receive-no-ready retry count exceeded"),
    )
]
UCX_PEER_FMTS = [
    *[
        Fmt(
            f"ucx-ep-{key}",
            "openucx/ucx src/ucp/core/ucp_ep.c, ucs/type/status.c@9466d104a3",
            _UCX_LOG + "ep 0x7f8b2c0{pid}: error '" + what + "' on rc_mlx5/mlx5_0:1 will not "
            "be handled since no error callback is installed\n",
            {
                "host": HOSTS,
                "pid": PIDS,
                "pidl": PIDL5,
                "tag": RANK_TAGS,
                "stamp": ("1762045780.123456",),
                "file": ("ucp_ep.c",),
                "line": (1661, 3337),
            },
            NET,
        )
        for key, what in (
            ("timeout", "Endpoint timeout"),
            ("reset", "Connection reset by remote peer"),
        )
    ],
    Fmt(
        "ucx-sock-connect",
        "openucx/ucx src/ucs/sys/sock.c@9466d104a3",
        _UCX_LOG + "connect(fd={fd}, dest_addr={peer}:{port}) failed: Connection refused\n",
        {
            "host": HOSTS,
            "pid": PIDS,
            "pidl": PIDL5,
            "tag": RANK_TAGS,
            "stamp": ("1762045780.123456",),
            "file": ("sock.c",),
            "line": (355, 325),
            "fd": (37, 112),
            "peer": ("10.4.0.17", "192.168.100.5", "172.31.12.9"),
            "port": (45678, 1025),
        },
        NET,
        "peer",
    ),
]


@pytest.mark.parametrize(("f", "text", "node"), params(HYDRA_FMTS))
def test_a_hydra_termination_block_names_its_node(f: Fmt, text: str, node: str) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params(UCX_FMTS + UCX_LOG_FMTS + UCX_PEER_FMTS))
def test_a_ucx_report_reads_as_its_source_documents(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


HNPS = ("login-01", "node0001", "head-3", "mgmt01")
HYDRA_LIB = "pmodels/mpich src/pm/hydra lib/hydra.h, proxy/pmip_cb.c, bscu_wait.c@6a79bf6575"
# HYDU_error_printf: "[%s] %s (%s:%d): " (the dbg prefix, __func__, __FILE__, __LINE__), then the
# message; each line of the unwinding chain that follows ends in the caller's own error
_CLOSED = (
    "[proxy:{pg}:{id}@{host}] HYD_pmcd_pmip_control_cmd_cb (pm/pmiserv/pmip_cb.c:{line}): "
    "assert (!closed) failed\n"
    "[proxy:{pg}:{id}@{host}] HYDT_dmxu_poll_wait_for_event (tools/demux/demux_poll.c:77): "
    "callback returned error status\n"
    "[proxy:{pg}:{id}@{host}] main (pm/pmiserv/pmip.c:{line}): demux engine error waiting for "
    "event\n",
    "[mpiexec@{hnp}] control_cb (pm/pmiserv/pmiserv_cb.c:{line}): assert (!closed) failed\n"
    "[mpiexec@{hnp}] HYDT_dmxu_poll_wait_for_event (tools/demux/demux_poll.c:77): callback "
    "returned error status\n"
    "[mpiexec@{hnp}] HYD_pmci_wait_for_completion (pm/pmiserv/pmiserv_pmci.c:{line}): error "
    "waiting for event\n",
    "[mpiexec@{hnp}] HYDT_bscu_wait_for_completion (tools/bootstrap/utils/bscu_wait.c:{line}): "
    "one of the processes terminated badly; aborting\n"
    "[mpiexec@{hnp}] HYDT_bsci_wait_for_completion (tools/bootstrap/src/bsci_wait.c:23): "
    "launcher returned error waiting for completion\n",
)
SYMPTOMS = [
    pytest.param(t.format(pg=0, id=i % 4, host=h, hnp=hnp, line=887 + i), id=f"hydra-sym-{k}-{i}")
    for k, t in enumerate(_CLOSED)
    for i, (h, hnp) in enumerate(
        zip(HOSTS[:4], ("login-01", "node0001", "head-3", "mgmt01"), strict=True)
    )
]


@pytest.mark.parametrize("text", SYMPTOMS)
def test_a_hydra_control_error_is_a_symptom_naming_no_culprit(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), (HYDRA_LIB, got)
    assert not got.explanation.startswith("No failure evidence"), text
    # the BAD TERMINATION block beside it decides, on the node it names
    block = _hydra_block(("=   PID 4711 RUNNING AT gpu-b-09", "=   EXIT CODE: 9"))
    got = explain_text(block + text)
    assert (got.category, got.blame, got.node) == (*OOM_HOST, "gpu-b-09"), (HYDRA, got)


@pytest.mark.parametrize(("f", "text", "node"), params(UCX_PEER_FMTS[:2]))
def test_a_ucx_endpoint_error_names_no_culprit(f: Fmt, text: str, node: None) -> None:
    # UCX's "error '<status>' on <lane>" names a transport lane, never the peer's host
    assert explain_text(text).node is None, (f.source, text)
