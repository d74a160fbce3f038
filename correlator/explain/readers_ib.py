"""`ibstat` output: an InfiniBand/RDMA port whose state says the link is down.

infiniband-diags' ibstat (linux-rdma/rdma-core infiniband-diags/ibstat.c, port_dump) prints each
port as "Port %d:" then "State: %s" (port_state_str: Down, Initializing, Armed, Active) and
"Physical state: %s" (port_phy_state_str: Sleep, Polling, Disabled, PortConfigurationTraining,
LinkUp, LinkErrorRecovery, PhyTest) on lines of their own, under "CA '%s'" when every CA is
listed. One line alone says nothing, so the port is read here as a whole and handed on as one
event that the `ibstat_port_down` rule (correlator/rules/emitters/ib_verbs.json) reads.
"""

from __future__ import annotations

import re

from correlator.explain.readers_gpu import ReadResult, _event
from timeline.models import EventKind

_CA = re.compile(r"^\s*CA '(?P<ca>[^']+)'\s*$")
_PORT = re.compile(r"^\s*Port (?P<port>\d+):\s*$")
_STATE = re.compile(r"^\s*State:\s*(?P<v>\S+)\s*$")
_PHYS = re.compile(r"^\s*Physical state:\s*(?P<v>\S+)\s*$")


def read_ibstat(lines: list[str]) -> ReadResult:
    """Each ibstat port whose logical and physical states are both shown, as one event."""
    out = ReadResult()
    ca: str | None = None
    port: str | None = None
    for i, line in enumerate(lines):
        if m := _CA.match(line):
            ca, port = m.group("ca"), None
        elif m := _PORT.match(line):
            port = m.group("port")
        elif port is not None and (m := _STATE.match(line)) and i + 1 < len(lines):
            phys = _PHYS.match(lines[i + 1])
            if phys is None:
                continue
            where = f"port {port} of CA '{ca}'" if ca else f"port {port}"
            message = f"ibstat: State: {m.group('v')}, Physical state: {phys.group('v')} ({where})"
            raw = f"{line}\n{lines[i + 1]}"
            out.events.append(_event(EventKind.OTHER, raw, message))
            out.claimed |= {i, i + 1}
            port = None
    return out
