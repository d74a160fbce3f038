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
- OpenLava (the open-source LSF; georgemarselis/openlava-macosx lsf/cmdtools/bhosts/bhosts.c
  @2993b8ed1f66) `bhosts` prtHostsShort: the HOST_NAME STATUS
  JL/U MAX NJOBS RUN SSUSP USUSP RSV header, each host prtWord(18, host) = "%-18.18s " (cut to
  18 characters; IBM's LSF marks a cut name with a leading "*"), printed whole with -w; and
  `bhosts -l` prtHostsLong: printf("%s  %s\\n", "HOST", host), the STATUS ... DISPATCH_WINDOW
  header, then the status row, then a blank line;
- Grid Engine `qstat -f` (qstat(1) OUTPUT FORMATS, "Full Format"): one row per queue instance,
  "queue@host", the queue type (B, I, P, C, T combined), "used/tot." (6.2 on: "resv/used/tot.")
  slots, the load average ("-NA-" when none is known), the architecture and the states
  (Grid Engine 6.0 printed the queue name "%-30.30s", so a name of 30 may have been cut);
- OpenPBS `pbsnodes -aS` (pbsnodes.c prt_node_summary: the vnode's name "%-15.15s", one
  space, its first state "%-15.15s", ...; -SL prints both whole) below its "vnode state OS
  hardware host ..." header;
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
# The states each view shows a node out of service in (the words the rules in slurm.json read):
# only a row or block in one of them gets its host, so a healthy row's host is never one the
# text names (explain falls back on the one host a text names when a finding has none).
_PBS_DOWN = frozenset(
    {"down", "offline", "offline_by_mom", "Stale", "state-unknown", "unresolvable"}
)
_LSF_DOWN = frozenset({"unavail", "unreach", "closed_Adm", "closed_LIM"})
_SGE_DOWN = re.compile(r"^[aACsSdDEcoPu]*[uEd][aACsSdDEcoPu]*$")
_PBS_NAME = re.compile(r"^" + _H + r"\s*$")
_PBS_ATTR = re.compile(r"^ {5}\w+(?:\.\w+)? = ")
_PBS_STATE = re.compile(r"^ {5}state = (?P<s>\S+)\s*$")
# pbsnodes -l: the name padded to 20 columns, one space, then the state (a comma list holding
# down or offline, the only nodes -l lists)
_PBS_LISTED = re.compile(
    r"^(?:[A-Za-z0-9][\w.-]{0,18} +(?<=^.{20})|[A-Za-z0-9][\w.-]{19,}) "
    r"(?:[\w-]+,)*(?:down|offline)(?:,[\w-]+)*(?: |$)"
)
_LSF_HOST = re.compile(r"^HOST  " + _H + r"\s*$")
_LSF_CUT = 18  # bhosts' HOST_NAME width: a name this long may have been cut
_SGE_CUT = 30
_SGE_QUEUE = re.compile(
    r"^[\w.-]+@" + _H + r"\s+[BIPCTLN]{1,6}\s+\d+(?:/\d+){1,2}\s+(?:[\d.]+|-NA-)\s+\S+"
    r"\s+(?P<st>[aACsSdDEcoPu]+)\s*$"
)
_MARKS = ("     ", "HOST", "@", " down", " offline", "vnode")
_LSF_STAMP = re.compile(r"^(?:[A-Z][a-z]{2} ){2}[ \d]\d \d\d:\d\d:\d\d(?: \d{4})?: \S")
_LSF_FOLD = " " * 21


def _pbs_down(state: str) -> bool:
    return any(s in _PBS_DOWN for s in state.split(","))


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


def _blocks(lines: list[str], starts: list[tuple[int, str | None]], out: list[str | None]) -> None:
    """Each block (its first line, its host) up to the next block or blank line: the host of
    every line in it, when one of its lines shows the node out of service."""
    for n, (first, host) in enumerate(starts):
        last = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        block = range(first, last)
        block = range(first, next((i for i in block if not lines[i].strip()), last))
        if host and any(_down_line(lines[i]) for i in block):
            for i in block:
                out[i] = out[i] or host


def _down_line(line: str) -> bool:
    """A pbsnodes -a state line or a bhosts -l status row in an out-of-service state."""
    m = _PBS_STATE.match(line)
    return _pbs_down(m.group("s")) if m else line.split(" ", 1)[0] in _LSF_DOWN


def _block_starts(lines: list[str]) -> list[tuple[int, str | None]]:
    """pbsnodes -a (a node's name line above its attributes) and bhosts -l ("HOST  name")."""
    starts: list[tuple[int, str | None]] = []
    for i, line in enumerate(lines):
        pbs = _PBS_NAME.match(line) if i + 1 < len(lines) else None
        if pbs and _PBS_ATTR.match(lines[i + 1]):
            starts.append((i, clean_host(pbs.group("h"))))
        elif lsf := _LSF_HOST.match(line):
            starts.append((i, clean_host(lsf.group("h"))))
    return starts


def _uncut(host: str | None, width: int) -> str | None:
    """`host` unless it fills a column that cuts longer names (it may be a cut one)."""
    return host if host and len(host) < width else None


def _tables(lines: list[str], out: list[str | None]) -> None:
    """bhosts and pbsnodes -aS rows in an out-of-service state: the host in the first column."""
    table = ""  # the header's first word, while inside a table
    for i, line in enumerate(lines):
        cells = line.split()
        if cells[:2] in (["HOST_NAME", "STATUS"], ["vnode", "state"]):
            table = cells[0]
        elif len(cells) < 2:
            table = ""  # a blank line ends the table
        elif table == "HOST_NAME" and cells[1] in _LSF_DOWN:
            out[i] = out[i] or _uncut(clean_host(cells[0]), _LSF_CUT)
        elif table == "vnode" and _pbs_down(cells[1]):
            out[i] = out[i] or _uncut(clean_host(cells[0]), 15)


def status_hosts(lines: list[str]) -> list[str | None]:
    """For each line, the node a pbsnodes / bhosts -l block or a pbsnodes -l / qstat -f row
    shows it for; None elsewhere."""
    out: list[str | None] = [None] * len(lines)
    if not any(mark in line for line in lines for mark in _MARKS):
        return out
    _lsf_history(lines, out)
    _blocks(lines, _block_starts(lines), out)
    _tables(lines, out)
    for i, line in enumerate(lines):
        if out[i]:
            continue
        if (m := _SGE_QUEUE.match(line)) and _SGE_DOWN.match(m.group("st")):
            cut = len(line.split()[0]) >= _SGE_CUT
            out[i] = None if cut else clean_host(m.group("h"))
        elif _PBS_LISTED.match(line):
            out[i] = clean_host(line.split()[0])
    return out
