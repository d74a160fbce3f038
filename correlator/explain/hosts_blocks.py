"""Hosts that a fan-out tool's block header names for the remote output below it.

Tools that run one command on many nodes and print each node's (or each group of nodes') output
under a header line: the header's host is the host of every line of its block, as pdsh's
"host: " prefix is of its line. A header that names several nodes (one output shared by all)
names none, by the corpus's policy that several nodes showing the same fault settle no culprit.

Sources:
- ClusterShell `clush -b` / `clubak -b`: cea-hpc/clustershell lib/ClusterShell/CLI/Display.py
  @06ca77d0378f (SEP = "-" * 15; format_header: SEP, then the node set with " (%d)" after it
  when it has more than one node, then SEP; _print_buffer: the header, then the shared output);
  `clush` without -b prefixes each line "node: " (print_line), which hosts.prefix_hosts reads;
- Ansible: ansible/ansible lib/ansible/plugins/callback/minimal.py (_command_generic_msg:
  "%s | %s | rc=%s >>\\n" then stdout, stderr and msg; "%s | FAILED! => %s", "%s | SUCCESS =>
  %s", "%s | UNREACHABLE! => %s" with the result as JSON, indent=4) and callback/default.py
  (v2_runner_on_failed / _unreachable: "fatal: [%s]: FAILED! => %s", "fatal: [%s]:
  UNREACHABLE! => %s", an item's "failed: [%s] (item=%s) => %s", "ok: [%s]", "changed: [%s]";
  host_label "%s -> %s" when the task was delegated to another host, which then ran it);
- parallel-ssh `pssh -i`: krig/parallel-ssh psshlib/task.py @1b3fe60602a4 (Task.report:
  "[%s] %s [SUCCESS|FAILURE] %s %s" of the sequence number, time.asctime()'s HH:MM:SS,
  pretty_host "user@host:port" (user and port only when given) and the failures ("Exited with
  error code %s", "Killed by signal %s", "Timed out"); then the host's stdout, and its stderr
  behind "Stderr: ").
MPICH's and Intel MPI's Hydra termination block is read the same way: its "RUNNING AT" line
names the node of the "=" lines below it, and so is `kubectl describe node`: its "Name:" line
names the node of its sections, up to where kubectl's output of it ends (describe_node_spans).

Where a block ends, its host ends: ClusterShell, Ansible and pssh print nothing after their last
block, so that one runs to the next header, Ansible banner, shell prompt (bash's, zsh's, fish's
or SUSE's, as hosts_fields reads them) or, for ClusterShell, the return codes its _close_common
prints after the gathered blocks (cea-hpc/clustershell lib/ClusterShell/CLI/Clush.py
@c09f82763b2b: "clush: %s: exited with exit code %d", "clush: %s: command timeout") or its
interactive prompt (ttyloop's "clush> "); a blank line is no end of a clush block: Display.py
_print_content writes the header, the gathered content and one "\n", so a blank line there is
the remote output's own (nvidia-smi's, a chained Python traceback's); a Hydra
block ends at its first line without "="; a describe block at describeNode's last line.
Ansible's ad-hoc "rc=N >>" blocks and pssh -i's print no end mark, but neither tool ever
prints a blank line: minimal.py's _command_generic_msg is the header, then stdout, stderr and
msg, then one "\\n" (Display.display adds none to a text that ends in one), and the command
module strips the trailing newlines of both streams (ansible/ansible lib/ansible/modules/
command.py: r['stdout'] = to_text(r['stdout']).rstrip("\\r\\n"), the same for stderr);
psshlib/callbacks.py DefaultCallbacks.finished (krig/parallel-ssh @33f1943171e1) prints the
status line, then the host's stdout and "Stderr: " with its stderr as they came, and the next
block's status line at once. So a blank line there is the remote output's own (nvidia-smi's
between its tables) or the paste's, between the run and what followed it: either way no line
after it is known to be the block host's, and the block ends there (a wrong node is worse than
none, issue #11). A line that a pdsh-style "host: " prefix gives to another host (`own`) is
another wrapper's line, and ends the block too, and so does a scheduler's or kubectl's table
header (_TABLE_HEAD: its rows are about what their columns name). Otherwise the last block still
runs to the end of the text (a dmesg paste right after it cannot be told from the block's own
dmesg).
"""

from __future__ import annotations

import re

from correlator.explain.hosts import clean_host
from correlator.explain.hosts_fields import FISH_PROMPT, SUSE_PROMPT, SUSE_ROOT_PROMPT, ZSH_PROMPT

_SEP = re.compile(r"^(?P<ind>\s*)-{15}\s*$")  # ClusterShell's Display.SEP, exactly 15 dashes
# the node set line: one node ("gpu-07"), a folded set ("gpu[01-03] (3)", "a,b (2)") or a
# group ("@gpu (8)"); the count appears only for a set of more than one node
_NODESET = re.compile(r"^\s*(?P<ns>\S+)(?: \((?P<n>\d+)\))?\s*$")

_HOST = r"(?P<h>[^\s|\[\]]+)"
# Ansible's and pssh's header lines, each naming the host its block is about (None where the
# label holds more than one host: Ansible's delegated "[a -> b]")
_HEADERS: tuple[re.Pattern[str], ...] = (
    # Ansible minimal.py: "host | FAILED | rc=1 >>", "host | FAILED! => {", and default.py:
    # "fatal: [host]: FAILED! => {...}", "failed: [host] (item=x) => {...}", "ok: [host]"
    re.compile(r"^" + _HOST + r" \| [A-Z]+!? \| rc=-?\d+ >>\s*$"),
    re.compile(r"^" + _HOST + r" \| (?:SUCCESS|CHANGED|FAILED!|UNREACHABLE!|SKIPPED) => "),
    re.compile(
        r"^(?:fatal|failed|ok|changed|skipping|unreachable): \[(?P<h>[^\]]+)\]"
        r"(?:: (?:FAILED|UNREACHABLE)!| \(item=.*?\))?(?: => |\s*$)"
    ),
    # pssh -i: "[2] 10:00:01 [FAILURE] root@gpu-07:2222 Exited with error code 1"
    re.compile(
        r"^\[\d+\] \d\d:\d\d:\d\d \[(?:SUCCESS|FAILURE)\] (?:[\w.-]+@)?(?P<h>[^\s:]+)(?::\d+)?"
        r"(?: .*)?$"
    ),
)
_JSON_RESULT = frozenset({1, 2})  # the _HEADERS whose result follows as JSON (" => ")
# lines that end a block without opening another: Ansible's banners ("TASK [x] ****", "PLAY
# RECAP ****"), a shell prompt (the paste went on with another command): bash's "user@host:dir$"
# or the bare "$ command" a paste shows a typed command with (bash's PS1 ends in "\$ "), and
# clush's return codes, printed after its last gathered block, and its interactive prompt
# (lib/ClusterShell/CLI/Clush.py @c09f82763b2b ttyloop: raw_input("clush> ") once a command's
# gathered output is written), with or without the next command typed at it
_ENDS = re.compile(
    r"^(?:(?:PLAY|TASK|RUNNING HANDLER|PLAY RECAP)\b.*\*{3,}\s*$"
    r"|\s*(?:\([\w.-]+\)\s*)?\[?[\w.-]+@[\w.-]+[: ][^\n#$%]*?[#$%](?:\s|$)"
    r"|\$ \S"
    r"|clush>(?: |$)"
    r"|clush: \S+(?: \(\d+\))?: (?:exited with exit code -?\d+|command timeout)\s*$)"
)
# the other shells' default prompts (hosts_fields: zsh's "gpu-07% ", fish's "user@host ~/dir> ",
# SUSE's "user@host:dir> " and root's "host:dir # "), tried one by one as each has its own host
# group; a bare zsh prompt is too like a word with a percent sign, so it ends a block only with
# a command typed after it, the others also bare (a paste drops the prompt's trailing space)
_PROMPTS = (
    re.compile(ZSH_PROMPT + r"\S"),
    re.compile(FISH_PROMPT),
    re.compile(SUSE_PROMPT),
    re.compile(SUSE_ROOT_PROMPT),
)


def _ends_block(line: str) -> bool:
    """Whether `line` ends a block without opening another: a banner, a prompt, clush's rc."""
    if _ENDS.match(line):
        return True
    bare = line.rstrip() + " "
    return any(p.match(bare) for p in _PROMPTS)


_MARKS = ("-" * 15, " | ", ": [", " [SUCCESS] ", " [FAILURE] ")


def _nodeset_host(ns: str, count: str | None) -> str | None:
    """The one node a ClusterShell node set names, or None for a set of several or a group."""
    if (count and count != "1") or any(c in ns for c in "[],@!&^"):
        return None
    # a word between two dashed rules ("Summary") is a title in many reports: a node's name
    # without a digit is taken for a host nowhere else either (hosts._pdsh_host)
    if not any(c.isdigit() for c in ns):
        return None
    return clean_host(ns)


def _clush_header(lines: list[str], i: int) -> re.Match[str] | None:
    """The node set line's match when lines i..i+2 are a ClusterShell header; else None."""
    first = _SEP.match(lines[i])
    if not first or i + 2 >= len(lines):
        return None
    last = _SEP.match(lines[i + 2])
    m = _NODESET.match(lines[i + 1])
    return m if last and m and last.group("ind") == first.group("ind") else None


def _header(line: str) -> tuple[str | None, bool] | None:
    """(the host, whether a JSON result follows) when `line` is an Ansible or pssh header."""
    for n, pattern in enumerate(_HEADERS):
        if m := pattern.match(line):
            return clean_host(m.group("h")), n in _JSON_RESULT
    return None


def block_hosts(lines: list[str], own: list[str | None] | None = None) -> list[str | None]:
    """For each line inside a clush -b, Ansible or pssh -i block (its header included), the
    host the block's header names; None outside blocks and in blocks of several nodes.
    `own`: the host each line's own pdsh-style prefix names (hosts.prefix_hosts), if known."""
    out: list[str | None] = [None] * len(lines)
    if not any(mark in ln for ln in lines for mark in _MARKS):
        return out  # every header has one of these; most texts have none
    host: str | None = None
    in_json = False  # inside a result pretty-printed below its header, up to its closing "}"
    unspaced = False  # in an Ansible "rc=N >>" or pssh -i block, which hold no blank line
    i = 0
    while i < len(lines):
        line = lines[i]
        ns = _clush_header(lines, i) if line.startswith(("-", " ")) else None
        if ns is not None:
            host, in_json = _nodeset_host(ns.group("ns"), ns.group("n")), False
            unspaced = False
            out[i : i + 3] = [host] * 3
            i += 3
            continue
        head = _header(line)
        if head is not None:
            out[i] = head[0]
            # a result on the header's own line is the whole block; one opened there ("=> {")
            # runs to its closing brace; an "rc=N >>" or pssh block to the next header
            opened = line.rstrip().endswith("{")
            host = head[0] if opened or not head[1] else None
            in_json = head[1] and opened
            unspaced = not head[1]
        elif in_json or not _ends_unspaced(line, host, unspaced, own[i] if own else None):
            out[i] = host
            if in_json and line.rstrip() == "}":
                host, in_json = None, False
        else:
            host = None
        i += 1
    return out


# The header of a scheduler's or kubectl's table: its rows name the jobs, partitions, pods and
# nodes they are about in their own columns and are never the output of the host that ran the
# command, so a block ends there, whether the table was pasted after it or run through the
# fan-out tool (a login node's squeue). SchedMD/slurm src/sacct/sacct.h DEFAULT_FIELDS
# "jobid,jobname,partition,account,alloccpus,state,exitcode" ("JobID JobName ...", "|" with -P);
# src/squeue/opts.c "JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)"; src/sinfo/opts.c
# "PARTITION AVAIL TIMELIMIT NODES STATE NODELIST" and, with -N, "NODELIST NODES PARTITION
# STATE"; kubernetes/kubernetes pkg/printers/internalversion/printers.go: pods' "NAME READY
# STATUS RESTARTS AGE", nodes' "NAME STATUS ROLES AGE VERSION", events' "LAST SEEN TYPE REASON
# OBJECT MESSAGE" (kubectl prints the column names upper-case)
_TABLE_HEAD = re.compile(
    r"^\s*(?:JobID[\s|]+JobName[\s|]|JOBID\s+PARTITION\s+NAME\s|PARTITION\s+AVAIL\s+TIMELIMIT\s"
    r"|NODELIST\s+NODES\s+PARTITION\s|NAME\s+READY\s+STATUS\s+RESTARTS\b"
    r"|NAME\s+STATUS\s+ROLES\s|LAST SEEN\s+TYPE\s+REASON\s)"
)


def _ends_unspaced(line: str, host: str | None, unspaced: bool, own: str | None) -> bool:
    """Whether `line` ends the block it is in (see _ends_block, _TABLE_HEAD); an Ansible "rc=N
    >>" or pssh -i block also ends at a blank line, and any block at another host's line."""
    if _ends_block(line) or (host is not None and _TABLE_HEAD.match(line)):
        return True
    if own and host and own.lower() != host.lower():
        return True
    return unspaced and host is not None and not line.strip()


# MPICH Hydra's BAD TERMINATION block (pmodels/mpich src/pm/hydra/mpiexec/pmiserv_cb.c
# @6a79bf6575: "=   PID %d RUNNING AT %s" then "=   EXIT CODE: %d"; Intel MPI's Hydra "=   RANK %d
# PID %d RUNNING AT %s" then "=   KILLED BY SIGNAL: %d (%s)"): the block's later "=" lines are
# about the process RUNNING AT that host
_HYDRA_AT = re.compile(
    r"^\s*=\s+(?:RANK \d+ )?PID \d+ RUNNING AT (?:[\w.-]+@)?(?P<h>[A-Za-z0-9][\w.-]*)\s*$"
)
# The block as a job's output reached syslog or the journal (a batch script's stderr under
# systemd, logger): RFC 3164's "Mmm dd hh:mm:ss host tag[pid]: " or an RFC 3339 stamp in its
# place; the header's host is the host that logged the block (often a login node running
# mpiexec), not the node the block is about
_LOG_HEADER = re.compile(
    r"^\s*(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) "
    r"[A-Za-z0-9][\w.-]* [\w./@-]{1,64}(?:\[\d+\])?: "
)


def hydra_block_hosts(lines: list[str]) -> list[str | None]:
    """For each line of a Hydra termination block below its RUNNING AT line, that line's host."""
    out: list[str | None] = [None] * len(lines)
    host: str | None = None
    for i, logged in enumerate(lines):
        line = _LOG_HEADER.sub("", logged, count=1)
        m = _HYDRA_AT.match(line)
        if m:
            host = clean_host(m.group("h"))
        elif not line.lstrip().startswith("="):
            host = None  # the block ended
        else:
            out[i] = host
    return out


# `kubectl describe node` (kubernetes/kubectl pkg/describe/describe.go @eb8363330e83 describeNode,
# describeNodeLease, describeNodeResource, DescribeEvents; "Node-Local ResourceSlices" from
# describeNodeResourceSlices @dee3483a3d6a; older kubectl, kubernetes/kubernetes
# pkg/printers/internalversion/describe.go @410dca70e397 and pkg/kubectl/describe.go
# @8f672ecf2088, also printed "ExternalID:", "Phase:", 1.6's "Role:" and, with no events, "No
# events." where "Events:\t<none>" is now): each section a "Key:" at the margin, its lines
# indented below it (PrefixWriter's LEVEL_1 "  ", the tabwriter padding the empty first cell of
# Labels', Annotations' and Taints' later lines), Events last. `kubectl describe nodes` puts
# blank lines between nodes (pkg/cmd/describe/describe.go: "\n\n%s"); describeNode writes none.
NODE_KEYS = (
    "Name|Roles?|Labels|Annotations|CreationTimestamp|Taints|Unschedulable|Lease|Phase|Conditions"
    "|Addresses|Capacity|Allocatable|Node-Local ResourceSlices|System Info|PodCIDRs?|ExternalID"
    "|ProviderID|Non-terminated Pods|Allocated resources|Pods|Events"
)
_NODE_KEY = re.compile(rf"^(?:{NODE_KEYS}):")
_NODE_NAME = re.compile(r"^Name:\s+(?P<name>\S+)\s*$")
# the keys that tell a node's block from another object's "Name:" (a pod's has "Namespace:")
_NODE_KIND = ("Roles:", "Role:", "Taints:", "Unschedulable:", "Capacity:")
# DescribeEvents with no event: the block's last line
_NO_EVENTS = re.compile(r"^(?:Events:\s+<none>|No events\.)\s*$")


def _section_key(line: str) -> bool:
    """Whether `line` opens one of describeNode's sections after its "Name:" line."""
    return bool(_NODE_KEY.match(line)) and not line.startswith("Name:")


def _describe_end(lines: list[str], first: int) -> int:
    """The index after the last line of the describe block whose "Name:" line is `first`."""
    for j in range(first + 1, len(lines)):
        line = lines[j]
        if line[:1].isspace() and line.strip():
            continue  # a section's indented line
        if _NO_EVENTS.match(line):
            return j + 1  # the last thing describeNode writes
        if not line.strip():
            # describeNode writes no blank line: one a paste put between two of its sections
            # is inside the block, any other ends it (the next node's, or other output)
            after = next((ln for ln in lines[j + 1 :] if ln.strip()), "")
            if _section_key(after):
                continue
            return j
        if not _section_key(line):
            return j  # another node's block, or no part of the describe output
    return len(lines)


def describe_node_spans(lines: list[str]) -> list[tuple[int, int, str | None]]:
    """(first, end, node) for each `kubectl describe node` block: the index of its "Name:"
    line, of the first line after it (a blank line not followed by another of its sections, a
    line at the margin that is none of describeNode's keys, another "Name:", or the line after
    "Events: <none>"), and the node its "Name:" line names."""
    spans: list[tuple[int, int, str | None]] = []
    i = 0
    while i < len(lines):
        m = _NODE_NAME.match(lines[i])
        near = lines[i + 1 : i + 4]
        if m is None or not any(ln.lstrip().startswith(_NODE_KIND) for ln in near):
            i += 1
            continue
        end = _describe_end(lines, i)
        spans.append((i, end, clean_host(m.group("name"))))
        i = end
    return spans


def describe_node_hosts(lines: list[str]) -> list[str | None]:
    """For each line inside a `kubectl describe node` block, the node it describes."""
    out: list[str | None] = [None] * len(lines)
    for first, end, node in describe_node_spans(lines):
        out[first:end] = [node] * (end - first)
    return out
