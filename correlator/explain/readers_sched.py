"""Readers for scheduler output: sacct (table, -P, --json), sinfo -R, kubectl tables/describe.

The table readers mostly supply *context*: which host a row or a describe block is about, so
that a pattern matched on that line can name the node the text names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from collector.slurm.parse import TERMINAL_STATES, ParseError, parse_sacct_json
from correlator.explain.hosts import clean_host, prefix_hosts
from correlator.explain.hosts_blocks import describe_node_hosts, hydra_block_hosts
from correlator.explain.hosts_status import status_hosts
from correlator.explain.readers_gpu import ReadResult, _event
from timeline.models import Event, EventKind

_DASHES = re.compile(r"^[\s-]+$")


def single_host(nodelist: str | None) -> str | None:
    """A node list that is one plain host name ('node[1-4]' or 'a,b' name none)."""
    if not nodelist or any(c in nodelist for c in "[],"):
        return None
    return clean_host(nodelist)


# Slurm's job states (src/common/slurm_protocol_defs.c job_state_string, with the flag states
# sacct prints). sacct's table cuts a longer value to its column and puts "+" last
# (src/common/print_fields.c print_fields_str): the State column is 10 wide, so OUT_OF_MEMORY
# prints as "OUT_OF_ME+" and "CANCELLED by 0" as "CANCELLED+". The Slurm source's terminal
# states are the collector's; the rest are the states a job passes through.
_JOB_STATES = TERMINAL_STATES | {
    "COMPLETING", "CONFIGURING", "LAUNCH_FAILED", "PENDING", "RECONFIG_FAIL", "REQUEUE_FED",
    "REQUEUE_HOLD", "RESIZING", "RESV_DEL_HOLD", "RUNNING", "SIGNALING", "SPECIAL_EXIT",
    "STAGE_OUT", "STOPPED", "SUSPENDED",
}  # fmt: skip


def expand_state(state: str) -> str:
    """A state sacct's table cut short ("OUT_OF_ME+"): the one job state it can be, else as is."""
    if not state.endswith("+"):
        return state
    head = state[:-1].upper()
    if head in _JOB_STATES:
        return head  # "CANCELLED+" is "CANCELLED by <uid>"
    fits = [s for s in _JOB_STATES if s.startswith(head)]
    return fits[0] if len(fits) == 1 else state


def _state_message(
    state: str, reason: str | None, job: str | None, exit_code: str | None = None
) -> str:
    parts = [f"State={state}"]
    if reason and reason not in ("None", "none"):
        parts.append(f"Reason={reason}")
    if exit_code and re.fullmatch(r"\d+:\d+", exit_code):
        parts.append(f"ExitCode={exit_code}")  # sacct's <exit status>:<signal>
    if job:
        parts.insert(0, f"job {job}")
    return " ".join(parts)


# A row of sacct's default or --brief table pasted without its header: both formats end with
# State and ExitCode (src/sacct/options.c: "jobid,jobname,partition,account,alloccpus,state,
# exitcode" and BRIEF_FIELDS "jobid,state,exitcode"), the job id first.
_HEADLESS_ROW = re.compile(
    r"^\s*(?P<job>\d{1,12}(?:_\d{1,9})?(?:\.[\w+-]{1,20})?)\s+(?:\S{1,64}\s+){0,8}?"
    r"(?P<state>[A-Z][A-Z_]{3,20}\+?)(?: by \d{1,10})?\s+(?P<exit>\d{1,3}:\d{1,3})\s*$"
)
_HEADLESS = ["JobID", "State", "ExitCode"]


def _headless_rows(lines: list[str], out: ReadResult) -> None:
    rows = [
        (j, [m["job"], m["state"], m["exit"]])
        for j, line in enumerate(lines)
        if (m := _HEADLESS_ROW.match(line)) and expand_state(m["state"]) in _JOB_STATES
    ]
    _sacct_rows(_HEADLESS, rows, lines, out)


def read_sacct_table(lines: list[str]) -> ReadResult:
    """`sacct` default (fixed-width) output and `sacct -P` (pipe-separated); rows of the
    default table pasted without their header."""
    out = ReadResult()
    for i, line in enumerate(lines):
        if "JobID" not in line or "State" not in line:
            continue
        if "|" in line:
            header = line.split("|")
            rows = [(j, lines[j].split("|")) for j in range(i + 1, len(lines)) if "|" in lines[j]]
        elif i + 1 < len(lines) and _DASHES.match(lines[i + 1]) and "-" in lines[i + 1]:
            header = line.split()
            rows = [(j, lines[j].split()) for j in range(i + 2, len(lines))]
            rows = [(j, cells) for j, cells in rows if cells]
        else:
            continue
        out.claimed.add(i)
        _sacct_rows(header, rows, lines, out)
    if not out.claimed:
        _headless_rows(lines, out)
    return out


def _sacct_rows(
    header: list[str], rows: list[tuple[int, list[str]]], lines: list[str], out: ReadResult
) -> None:
    cols = {h.strip().lower(): n for n, h in enumerate(header)}
    state_col = cols.get("state")
    if state_col is None:
        return
    for j, cells in rows:
        if len(cells) != len(header):
            break  # the table ended (or a state with spaces such as "CANCELLED by 0")
        state = cells[state_col].strip().split()[0] if cells[state_col].strip() else ""
        state = expand_state(state)
        out.claimed.add(j)
        if not state or state in QUIET_STATES:
            continue
        cell = {k: cells[n].strip() for k, n in cols.items()}
        out.events.append(
            job_state_event(
                lines[j],
                state,
                cell,
                node=single_host(cell.get("nodelist")),
                scope="sacct",
            )
        )


# A job state that says nothing went wrong: no event (sacct's rows and scontrol's JobState=).
QUIET_STATES = frozenset({"COMPLETED", "RUNNING", "PENDING"})


def job_state_event(
    raw: str, state: str, fields: dict[str, str], *, node: str | None, scope: str
) -> Event:
    """The JOB_STATE event of one job's state (fields: jobid, reason, exitcode, user), which
    the scheduler rules read the same whichever Slurm tool printed it."""
    job = fields.get("jobid") or None
    return _event(
        EventKind.JOB_STATE,
        raw,
        _state_message(state, fields.get("reason"), job, fields.get("exitcode")),
        node=node,
        job_id=(job or "").split(".")[0] or None,
        payload={"state": state, "user": fields.get("user") or None, "scope": scope},
    )


def read_sacct_json(text: str) -> ReadResult:
    """`sacct --json` through the collector's parser: one JOB_STATE event per unfinished job."""
    out = ReadResult()
    try:
        records, _skipped = parse_sacct_json(text)
    except ParseError:
        return out  # not sacct JSON: the other readers get the text
    for rec in records:
        if rec.state in QUIET_STATES:
            continue
        node = rec.nodes[0] if len(rec.nodes) == 1 else None
        summary = {
            "job_id": rec.job_id,
            "state": rec.state,
            "nodes": rec.nodes,
            "user": rec.user,
            "reason": rec.reason,
        }
        out.events.append(
            _event(
                EventKind.JOB_STATE,
                json.dumps(summary),
                _state_message(rec.state, rec.reason, rec.job_id),
                node=clean_host(node),
                job_id=rec.job_id,
                payload={"state": rec.state, "user": rec.user, "scope": "sacct-json"},
            )
        )
    out.claimed = set(range(len(text.splitlines())))
    return out


# --- kubectl describe node: GPUs the device plugin withholds ------------------------------------

_GPU_RESOURCE = re.compile(r"^\s+(?P<res>(?:nvidia|amd)\.com/gpu):\s+(?P<n>\d+)\s*$")
WITHHELD = "GPU(s) withheld as unhealthy by the device plugin"


def read_k8s_node_gpus(lines: list[str]) -> ReadResult:
    """`kubectl describe node`: GPUs under Capacity but missing from Allocatable are the ones the
    device plugin reported unhealthy (ListAndWatch), which the kubelet does not offer to pods."""
    out = ReadResult()
    name: str | None = None
    section: str | None = None
    capacity: dict[str, int] = {}
    for i, line in enumerate(lines):
        if m := _DESCRIBE_NAME.match(line):
            name, section, capacity = clean_host(m.group("name")), None, {}
            continue
        if line[:1].strip():  # a top-level key ends the Capacity/Allocatable block
            section = line.strip() if line.strip() in ("Capacity:", "Allocatable:") else None
            continue
        g = _GPU_RESOURCE.match(line)
        if g is None or section is None:
            continue
        res, count = g.group("res"), int(g.group("n"))
        if section == "Capacity:":
            capacity[res] = count
        elif count < capacity.get(res, 0):
            gone = capacity[res] - count
            msg = f"{res}: allocatable {count} of capacity {capacity[res]}: {gone} {WITHHELD}"
            out.events.append(_event(EventKind.OTHER, line, msg, node=name))
            out.claimed.add(i)
    return out


# --- per-line host context for tables and describe blocks -------------------------------------

_DESCRIBE_NAME = re.compile(r"^Name:\s+(?P<name>\S+)\s*$")


# Rows of `kubectl get pods` pasted without their header, read only where the row's own shape
# says which cell is the node (kubernetes/kubernetes pkg/printers/internalversion/printers.go,
# podColumnDefinitions and printPod; the stored 51652d1c232d has the columns up to Node, later
# versions add "Nominated Node" and "Readiness Gates" and print a restart count with its age,
# fmt.Sprintf("%d (%s ago)", restarts, ...)):
# - `-o wide` (`-A` puts NAMESPACE first): NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE
#   READINESS GATES, READY "n/m", RESTARTS "n" or "n (5m ago)", AGE a duration, IP "<none>" or
#   an address, the last two "<none>" or a node / "n/m";
# - a NAME [NAMESPACE] STATUS NODE MESSAGE listing (custom columns over .status.reason,
#   .spec.nodeName, .status.message) of an Evicted pod, where the message is the kubelet's own:
#   pkg/kubelet/eviction/helpers.go (008b3652959c) "The node was low on resource: %v. ", "The
#   node had condition: %v. ", "Container %s exceeded its local ephemeral storage limit %q. ",
#   "Pod ephemeral local storage usage exceeds ...", "Usage of EmptyDir volume %q exceeds ...",
#   with "Pod " in front when the kubelet rejected the pod at admission (pkg/kubelet/kubelet.go
#   rejectPod: Message: "Pod " + message).
_NODE_CELL = r"(?P<h>[A-Za-z0-9][\w.-]*)"
_WIDE_POD_ROW = re.compile(
    r"^(?:[a-z0-9][\w.-]*\s+)?[a-z0-9][\w.-]*\s+\d+/\d+\s+[A-Z][\w:./-]*\s+"
    r"\d+(?: \(\S+ ago\))?\s+(?:\d+[smhdy][\dsmhdy]*|<unknown>)\s+(?:<none>|[\d.]+|[\da-fA-F:]+)\s+"
    + _NODE_CELL
    + r"\s+(?:<none>|[\w.-]+)\s+(?:<none>|\d+/\d+)\s*$"
)
_EVICTED_POD_ROW = re.compile(
    r"^[a-z0-9][\w.-]*\s+(?:[a-z0-9][\w.-]*\s+)?Evicted\s+"
    + _NODE_CELL
    + r"\s+(?:Pod )?(?:The node (?:was low on resource|had condition)|Container \S+ exceeded its "
    r"local ephemeral storage limit|Pod ephemeral local storage usage exceeds|Usage of EmptyDir)"
)


def pod_row_host(line: str) -> str | None:
    """The node a headerless `kubectl get pods` row names, where the row's shape settles it."""
    if "/" not in line and "Evicted" not in line:
        return None
    m = _WIDE_POD_ROW.match(line) or _EVICTED_POD_ROW.match(line)
    return clean_host(m.group("h")) if m else None


@dataclass(frozen=True)
class _Table:
    """A table whose rows name hosts: which column, and how a row is cut into its cells."""

    col: int  # the host column (negative: counted from the row's end)
    least: int  # the fewest whitespace-separated tokens a row has
    # kubectl's columns as its header names them (cut at 2+ spaces: "NOMINATED NODE" is one
    # column) and where the host column's name starts, for a row cut the same way
    names: tuple[str, ...] | None = None
    at: int = -1


def context_hosts(
    lines: list[str],
    *,
    prefixed: list[str | None] | None = None,
    hydra: list[str | None] | None = None,
) -> list[str | None]:
    """For each line, the host its table row or `kubectl describe node` block is about;
    `prefixed`: prefix_hosts(lines), `hydra`: hydra_block_hosts(lines), when the caller has
    them already."""
    hints: list[str | None] = [None] * len(lines)
    table: _Table | None = None
    # a describe block's node is the host of its own lines only, not of what follows it
    described = describe_node_hosts(lines)
    for i, line in enumerate(lines):
        if not line.strip():
            table = None
            continue
        header = _table_header(line)
        if header is not None:
            table = header
            continue
        if table is not None and len(line.split()) < table.least:
            table = None  # not a row: the table ended
        if table is not None:
            hints[i] = _row_host(table, line)
            continue
        hints[i] = pod_row_host(line) or described[i]
    for i, host in enumerate(hydra_block_hosts(lines) if hydra is None else hydra):
        hints[i] = hints[i] or host
    for i, host in enumerate(status_hosts(lines)):
        hints[i] = hints[i] or host
    for i, host in enumerate(prefix_hosts(lines) if prefixed is None else prefixed):
        hints[i] = hints[i] or host
    return hints


# kubectl's table printer pads its columns with spaces (staging/src/k8s.io/cli-runtime/pkg/
# printers/tabwriter.go: tabwriterPadding = 3, tabwriterPadChar = ' '), so a value with a space
# in it ("3 (2m ago)" in RESTARTS, "NOMINATED NODE" in the header) is one cell between runs of
# 2+ spaces, and each cell starts where its column's name does.
_COLUMNS = re.compile(r"\s{2,}|\t")
_CELL = re.compile(r"\S+(?: \S+)*")
# kubectl's column names with a space (pkg/printers/internalversion/printers.go, pods' -o wide)
_MULTIWORD = ("NOMINATED NODE", "READINESS GATES")


def _row_host(table: _Table, line: str) -> str | None:
    """The host a row of `table` names in the host column, when the row's cells settle it."""
    cells = line.split()
    if table.names is None:
        return single_host(cells[table.col]) if -len(cells) <= table.col < len(cells) else None
    if row := kubectl_row(table.names, line):
        return single_host(row[table.col])
    # the cells ran together somewhere: the value that starts under the column's name
    at = table.at
    if 0 <= at < len(line) and not line[at].isspace() and (at == 0 or line[at - 1].isspace()):
        return single_host(line[at:].split()[0])
    return None


def kubectl_row(names: tuple[str, ...], line: str) -> list[str] | None:
    """A row's cells, one for each of a kubectl header's column `names`, where its spacing
    settles them; else None."""
    for row in (_COLUMNS.split(line.strip()), line.split()):  # a paste may keep one space
        if len(row) == len(names):
            return row
    return None


def kubectl_columns(line: str) -> list[tuple[int, str]]:
    """(where it starts, name) of each column a kubectl header names."""
    spans = [(m.start(), m.group()) for m in _CELL.finditer(line)]
    if all(" " not in name or name in _MULTIWORD for _, name in spans):
        return spans
    words = [(m.start(), m.group()) for m in re.finditer(r"\S+", line)]  # the spacing was lost
    out: list[tuple[int, str]] = []
    for at, word in words:
        if out and f"{out[-1][1]} {word}" in _MULTIWORD:
            out[-1] = (out[-1][0], f"{out[-1][1]} {word}")
        else:
            out.append((at, word))
    return out


def _table_header(line: str) -> _Table | None:
    """The host column and row shape when `line` heads a table whose rows name hosts."""
    cells = line.split()
    if not cells:
        return None
    upper = [c.upper() for c in cells]
    if cells == upper and "NAME" in upper and "STATUS" in upper:
        columns = kubectl_columns(line)
        names = tuple(name for _, name in columns)
        key = "NODE" if "NODE" in names else "NAME" if "READY" not in names else None
        if key is None:
            return None
        col = names.index(key)  # kubectl get pods -o wide / kubectl get nodes
        return _Table(col=col, least=len(names), names=names, at=columns[col][0])
    if "REASON" in cells and cells[-1] == "NODELIST":  # sinfo -R
        return _Table(col=-1, least=2)
    if cells[0] == "NODELIST" and "STATE" in cells:  # sinfo -N (-l)
        return _Table(col=0, least=2)
    return None
