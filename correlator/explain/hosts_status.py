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
  slots, the load average ("-NA-" when none is known), the architecture and the states;
- LSF's job history (bjobs -l, bhist -l), folded at 80 columns: OpenLava lsbatch/cmd/cmd.misc.c
  (towel1980/openlava @58eb47467ee9) prtLine, WIDTH 80 and BLANKLEN 22, goes on after a newline
  and 21 spaces, mid-word, so a host name can be cut in two ("<lsfworker-interactive-04fa8c" /
  "                     58.helix...>"); an entry is its "Mon Oct  1 11:14:05: " line and the
  folded lines below it, read joined.
"""

from __future__ import annotations

import re

from correlator.explain.hosts import clean_host, host_in_line

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
_LSF_STAMP = re.compile(r"^(?:[A-Z][a-z]{2} ){2}[ \d]\d \d\d:\d\d:\d\d(?: \d{4})?: \S")
_LSF_FOLD = " " * 21


def _lsf_history(lines: list[str], out: list[str | None]) -> None:
    """bjobs -l / bhist -l: an entry folded over several lines names the host its joined text
    names, for each of its lines (a host cut by the fold is read whole)."""
    i = 0
    while i < len(lines):
        end = i + 1
        if _LSF_STAMP.match(lines[i]):
            while end < len(lines) and lines[end].startswith(_LSF_FOLD):
                end += 1
        if end > i + 1 and not host_in_line(lines[i]):
            joined = lines[i].rstrip("\n") + "".join(
                ln[len(_LSF_FOLD) :] for ln in lines[i + 1 : end]
            )
            host = host_in_line(joined)
            for j in range(i, end):
                out[j] = out[j] or host
        i = end


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
    _lsf_history(lines, out)
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
