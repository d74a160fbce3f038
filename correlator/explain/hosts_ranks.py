"""Where an MPI job's ranks ran, as the text shows it: a peer named by rank becomes a host."""

from __future__ import annotations

import re

from correlator.rules.hosts import RANK_PEER, rank_peer

# MVAPICH2 (kumattau/mvapich2 @7b3539c49333): each rank prints behind "[<host>:mpi_rank_<n>]"
# (src/mpid/ch3/src/mpid_init.c, the PRINT_ERROR prefix of
# src/mpid/ch3/channels/common/include/debug_utils.h), and an mpispawn reports its own ranks
# as "[<host>:mpispawn_<i>][child_handler] MPI process (rank: <n>, pid: <p>) ..."
# (src/pm/mpirun/mpispawn.c): either way rank n ran on that host.
_H = r"(?P<h>[A-Za-z0-9][\w.-]*)"
_RANK_LINES = (
    re.compile(r"^\s*\[" + _H + r":mpi_rank_(?P<r>\d+)\]\[\w+\] "),
    re.compile(
        r"^\s*\[" + _H + r":mpispawn_\d+\]\[child_handler\] MPI process \(rank: (?P<r>\d+),"
    ),
)


def rank_hosts(lines: list[str]) -> dict[str, str]:
    """Rank marker (rules.hosts.rank_peer) -> the host the text shows that rank ran on; a rank
    shown on two hosts (two jobs in one text) maps to none."""
    seen: dict[str, str | None] = {}
    for line in lines:
        if "mpi_rank_" not in line and "child_handler" not in line:
            continue
        m = next((m for p in _RANK_LINES if (m := p.match(line))), None)
        key = rank_peer(m.group("r")) if m else None
        if m and key:
            host = m.group("h")
            if seen.setdefault(key, host) not in (None, host):
                seen[key] = None
    return {k: h for k, h in seen.items() if h}


def unresolved_rank(peer: str, addresses: dict[str, str]) -> bool:
    """Whether `peer` is a peer rank whose host the text does not show (it names no node)."""
    return peer.startswith(RANK_PEER) and peer not in addresses
