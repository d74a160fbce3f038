"""Hosts that the node status views of PBS, LSF and Grid Engine name for their rows and blocks.

Each view prints one node per row or block; a line inside it is about that node, so a rule that
reads the line's state (correlator/rules/emitters/slurm.json's pbs_node_state_down,
lsf_host_unavailable, sge_queue_instance_error) names the node the view shows it for. Several
nodes in the same state are several findings on different hosts, which name none.

Sources:
- OpenPBS `pbsnodes -a` (openpbs/openpbs src/cmds/pbsnodes.c @0946a0001cf9 prt_node: the node's
  name alone, printf("%s\\n", bstat->name), then each attribute printf("     %s", name), ".%s"
  for a resource, " = %s\\n" for its value, then a blank line) and `pbsnodes -l` (LISTMRK:
  printf("%-20s %s %s\\n", name, state, comment) for each node marked down or offline);
- OpenLava (the open-source LSF, towel1980/openlava lsf/cmdtools/bhosts.c, the same in
  georgemarselis/openlava-macosx @2993b8ed1f66) `bhosts -l` prtHostsLong: printf("%s  %s\\n",
  "HOST", host), the STATUS ... DISPATCH_WINDOW header, then the status row, then a blank line;
- Grid Engine `qstat -f` (qstat(1) OUTPUT FORMATS, "Full Format"): one row per queue instance,
  "queue@host", the queue type (B, I, P, C, T combined), "used/tot." (6.2 on: "resv/used/tot.")
  slots, the load average ("-NA-" when none is known), the architecture and the states.
"""

from __future__ import annotations

import re

from correlator.explain.hosts import clean_host

_H = r"(?P<h>[A-Za-z0-9][\w.-]*)"
_PBS_NAME = re.compile(r"^" + _H + r"\s*$")
_PBS_ATTR = re.compile(r"^ {5}\w+(?:\.\w+)? = ")
# pbsnodes -l: the name padded to 20 columns, one space, then the state (a comma list holding
# down or offline, the only nodes -l lists)
_PBS_LISTED = re.compile(
    r"^(?:[A-Za-z0-9][\w.-]{0,18} +(?<=^.{20})|[A-Za-z0-9][\w.-]{19,}) "
    r"(?:[\w-]+,)*(?:down|offline)(?:,[\w-]+)*(?: |$)"
)
_LSF_HOST = re.compile(r"^HOST  " + _H + r"\s*$")
_SGE_QUEUE = re.compile(
    r"^[\w.-]+@" + _H + r"\s+[BIPCTLN]{1,6}\s+\d+(?:/\d+){1,2}\s+(?:[\d.]+|-NA-)\s+\S+"
    r"(?:\s+[aACsSdDEcoPu]+)?\s*$"
)
_MARKS = ("     ", "HOST  ", "@", " down", " offline")


def _pbs_blocks(lines: list[str], out: list[str | None]) -> None:
    """pbsnodes -a: each attribute line below a node's name line is that node's."""
    host: str | None = None
    for i, line in enumerate(lines):
        m = _PBS_NAME.match(line)
        if m and i + 1 < len(lines) and _PBS_ATTR.match(lines[i + 1]):
            host = clean_host(m.group("h"))
            out[i] = out[i] or host
        elif host and _PBS_ATTR.match(line):
            out[i] = out[i] or host
        else:
            host = None


def _lsf_blocks(lines: list[str], out: list[str | None]) -> None:
    """bhosts -l: the lines from "HOST  name" to the blank line after its status row."""
    host: str | None = None
    for i, line in enumerate(lines):
        m = _LSF_HOST.match(line)
        if m:
            host = clean_host(m.group("h"))
        elif not line.strip():
            host = None
        out[i] = out[i] or host


def status_hosts(lines: list[str]) -> list[str | None]:
    """For each line, the node a pbsnodes / bhosts -l block or a pbsnodes -l / qstat -f row
    shows it for; None elsewhere."""
    out: list[str | None] = [None] * len(lines)
    if not any(mark in line for line in lines for mark in _MARKS):
        return out
    _pbs_blocks(lines, out)
    _lsf_blocks(lines, out)
    for i, line in enumerate(lines):
        if out[i]:
            continue
        if m := _SGE_QUEUE.match(line):
            out[i] = clean_host(m.group("h"))
        elif _PBS_LISTED.match(line):
            out[i] = clean_host(line.split()[0])
    return out
