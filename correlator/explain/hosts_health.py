"""Lines that name a host without showing it at fault: the last resort never names their host.

When a failure's own lines name no host, explain falls back on the one host the whole text
names (reasoning.node_of). A status view that shows that host up with nothing wrong, or a shell
prompt at which nothing ran that printed the failure, does not make it the culprit (issue #11:
a wrong node is worse than none, the healer may drain it). Such a line still names its host for
everything else (a peer's interface name, the events read from the line itself).

Sources:
- `kubectl get nodes`: kubernetes/kubernetes pkg/printers/internalversion/printers.go
  (51652d1c232d) printNode: NAME STATUS ROLES AGE VERSION, STATUS the Ready condition ("Ready"
  when True, "NotReady" otherwise, "Unknown" without one) and ",SchedulingDisabled" for a
  cordoned node: only a plain "Ready" is healthy;
- `kubectl get pods -o wide`: the same file's printPod (NAME READY STATUS RESTARTS AGE IP NODE
  NOMINATED NODE READINESS GATES, a headerless row read as readers_sched.pod_row_host does):
  STATUS the pod's phase ("Running", "Succeeded", "Pending", ...) unless a container's waiting
  or terminated reason replaces it ("Completed" for a container that exited 0, "Error",
  "OOMKilled", "CrashLoopBackOff", ...); RESTARTS "%d" or "%d (%s ago)". Healthy: Running with
  every container ready ("n/n"), or Completed / Succeeded, and never restarted;
- `sinfo -N` / `sinfo -N -l`: SchedMD/slurm src/sinfo/opts.c (284c3b95f08a) formats
  "nodelist, nodes, partition, statecompact" and "... statelong ..., reason:20"; the states are
  src/common/slurm_protocol_defs.c node_state_string / node_state_string_compact lower-cased
  (print.c _print_state_compact), a flag suffix ("*" not responding, "~" powered down, "$"
  maintenance, "@" reboot requested, ...) behind them, a drained node "drain"/"drng" (older
  releases printed one that still ran jobs "mixed", which only its reason tells apart); REASON
  "none" when the node has none (print.c _print_reason). Healthy: idle / alloc(ated) / mix(ed) /
  comp(leting) / plnd / planned / resv / reserved, no suffix, no reason;
- `scontrol show node` (and -o): src/api/node_info.c slurm_sprint_node_table "NodeName=%s ",
  "State=%s" node_state_string_complete (the base state, then "+FLAG" for each flag: "IDLE+DRAIN",
  "DOWN+NOT_RESPONDING", "IDLE+CLOUD+POWERED_DOWN"), and a "Reason=%s [%s@%s]" line only when
  the node has a reason. Healthy: IDLE / ALLOCATED / MIXED with no flag but CLOUD, COMPLETING,
  PLANNED or RESERVED, and no Reason;
- `kubectl describe node`: kubernetes/kubectl pkg/describe/describe.go (eb8363330e83)
  describeNode: "Name:\t%s", ..., printNodeTaintsMultiline "Taints:\t<none>" when it has none,
  "Unschedulable:\t%v", then "Conditions:" with the "  Type\tStatus\tLastHeartbeatTime..."
  header, a "  ----" rule and a "  %v \t%v \t..." row per condition (Type, Status), then
  "Addresses:" ... and the Events table, each section's lines indented under its "Key:" line.
  The node conditions are problems when True (MemoryPressure, DiskPressure, PIDPressure,
  NetworkUnavailable, node-problem-detector's) except Ready, which must be True. Healthy: every
  condition False but Ready True, no taint, schedulable, and no line of the block failing;
- shell prompts (bash's, zsh's, fish's, SUSE's, hosts.py BASH_PROMPT, hosts_fields.ZSH_PROMPT,
  FISH_PROMPT, SUSE_PROMPT and SUSE_ROOT_PROMPT): the host of a prompt is where its command
  ran, so a failure is that host's when it is in the output of a command typed there (the
  lines up to the next prompt), or, above every prompt, in the terminal whose prompt came back
  below it (the corpus policy: a job's output and then its shell's prompt name that shell's
  host); a prompt whose output holds no failure (an nvidia-smi that shows nothing wrong, a
  file viewed that another host wrote, a prompt with nothing typed at it) shows nothing of it;
- pdsh's "host: " in front of each line a host writes (chaos/pdsh src/pdsh/dsh.c, cited in
  hosts.py): a stream none of whose lines holds the failure is not where it was printed.

A healthy run's progress lines (progress_lines) name their host too: every rank of a job prints
NCCL's init lines, srun -v a launch line per node, torch elastic a rendezvous line per node.
A host seen only so is no suspect while another host may be (readers.read_delivered); when no
host is seen otherwise, the one host of a job's log is still its host. Sources:
- NCCL's "%s:%d:%d [%d] NCCL INFO " prefix (NVIDIA/nccl src/debug.cc ncclDebugLog: host,
  pid, tid, cudaDev) before its init messages: src/init.cc "comm %p rank %d nranks %d cudaDev
  %d ... - Init START" / "- Init COMPLETE", "Trees", "threadThresholds", "%d coll channels,
  ...", "Connected all rings" / "Connected all trees", "Setting affinity for GPU",
  "cudaDriverVersion"; src/graph/rings.cc "Channel %02d/%02d : " and the ring's ranks; the
  transports' "Channel %02d : %d[%lx] -> %d[%lx] via %s" (src/transport/p2p.cc, shm.cc,
  net.cc; "Ring %02d :" in NCCL 2.4); src/bootstrap.cc "Bootstrap : Using"; src/net.cc
  "NET/Plugin", "Using network"; NET/IB's and NET/Socket's "NET/%s : Using"; NET/IB's "NET/IB :
  No device found." (src/transport/net_ib.cc ncclIbInit: a host with no RDMA device, whose
  NCCL goes on over sockets, src/net.cc disabling a transport with no devices); src/misc/param.cc
  "%s set by environment to". An error's INFO lines ("%s:%d -> %d", src/include/checks.h)
  are none of these;
- Slurm srun -v: SchedMD/slurm src/api/step_launch.c "launching %ps on host %s, %u tasks: %s";
- torch elastic: torch/distributed/elastic/rendezvous/dynamic_rendezvous.py "The node '%s' has
  joined round %d of the rendezvous '%s' as rank %d in a world of size %d.";
- Open MPI's --report-bindings: "MCW rank %d bound to %s: %s" (open-mpi/ompi v4.x
  orte/mca/ess/base/ess_base_fns.c orte_ess_base_proc_binding) behind opal_output's
  "[host:pid] " prefix;
- a training step's metrics: the dict Hugging Face transformers' Trainer logs
  (trainer_callback.py ProgressCallback.on_log: str(logs), "{'loss': ..., 'epoch': ...}"), as a
  delivery that names its host passes it on (Ray's "({actor} pid={pid}, ip={ip}) ", wrappers.py);
- syslog lines of a session opened and a cron job run: systemd src/login/logind-session.c "New
  session %s of user %s.", cron's "(%s) CMD (%s)" (cron's do_command.c log_it "CMD").
"""

from __future__ import annotations

import re

from correlator.explain.hosts import BASH_PROMPT
from correlator.explain.hosts_blocks import NODE_KEYS, describe_node_spans
from correlator.explain.hosts_fields import (
    FISH_PROMPT,
    SUSE_PROMPT,
    SUSE_ROOT_PROMPT,
    ZSH_PROMPT,
)
from correlator.explain.readers_sched import kubectl_columns, kubectl_row, pod_row_host

_NODE_READY = "Ready"
_POD_DONE = frozenset({"Completed", "Succeeded"})
_READY = re.compile(r"^(?P<n>\d+)/(?P=n)$")
_SINFO_OK = frozenset(
    {"idle", "alloc", "allocated", "mix", "mixed", "comp", "completing", "plnd", "planned"}
    | {"resv", "reserved"}
)
_SCONTROL_BASE_OK = frozenset({"IDLE", "ALLOCATED", "MIXED"})
_SCONTROL_FLAGS_OK = frozenset({"CLOUD", "COMPLETING", "PLANNED", "RESERVED"})
_STATE = re.compile(r"(?:^|\s)State=(?P<s>\S+)")
_REASON = re.compile(r"(?:^|\s)Reason=\S")
# describeNode's keys at the margin (hosts_blocks.NODE_KEYS) and their values
_DESCRIBE_KEY = re.compile(rf"^({NODE_KEYS}):\s*(.*)$")
_PROMPTS = tuple(
    re.compile(p) for p in (BASH_PROMPT, ZSH_PROMPT, FISH_PROMPT, SUSE_PROMPT, SUSE_ROOT_PROMPT)
)


def _healthy_pod(ready: str, status: str, restarts: str) -> bool:
    """A pod row's READY, STATUS and RESTARTS cells show it ran (or runs) with nothing wrong."""
    if restarts != "0":
        return False
    return status in _POD_DONE or (status == "Running" and _READY.match(ready) is not None)


def _kubectl_tables(lines: list[str], out: list[bool]) -> None:
    """Rows of `kubectl get nodes` and `kubectl get pods -o wide` that show a healthy node or
    pod, under their header up to a blank line."""
    names: tuple[str, ...] | None = None
    for i, line in enumerate(lines):
        cells = line.split()
        if not cells:
            names = None
        elif cells == [c.upper() for c in cells] and "NAME" in cells and "STATUS" in cells:
            names = tuple(name for _, name in kubectl_columns(line))
        elif names and (row := kubectl_row(names, line)):
            got = dict(zip(names, row, strict=True))
            if "NODE" in got and "READY" in got:
                out[i] = _healthy_pod(got["READY"], got["STATUS"], got.get("RESTARTS", ""))
            elif "ROLES" in got or "VERSION" in got:
                out[i] = got["STATUS"] == _NODE_READY
        elif names is None and pod_row_host(line):
            # a pod row pasted without its header, its cells counted from the end: READINESS
            # GATES, NOMINATED NODE, NODE, IP, AGE, RESTARTS (a restart's "(5m ago)" makes it
            # two cells, and the pod no healthy one), STATUS, READY
            out[i] = _healthy_pod(cells[-8], cells[-7], cells[-6])


def _sinfo_rows(lines: list[str], out: list[bool]) -> None:
    """`sinfo -N` (-l) rows of a node up with no reason."""
    state = reason = -1
    for i, line in enumerate(lines):
        cells = line.split()
        if cells[:1] == ["NODELIST"] and "STATE" in cells:
            state = cells.index("STATE")
            reason = cells.index("REASON") if "REASON" in cells else -1
        elif len(cells) <= state:
            state = -1  # a blank or short line ends the table
        elif state >= 0:
            why = " ".join(cells[reason:]) if reason >= 0 else "none"
            out[i] = cells[state] in _SINFO_OK and why == "none"


def _scontrol_blocks(lines: list[str], out: list[bool]) -> None:
    """`scontrol show node` blocks (a NodeName= line and its indented lines) of a node up with
    no reason, every line of the block."""
    starts = [i for i, line in enumerate(lines) if line.startswith("NodeName=")]
    for n, first in enumerate(starts):
        last = starts[n + 1] if n + 1 < len(starts) else len(lines)
        end = next((j for j in range(first + 1, last) if not lines[j][:1].isspace()), last)
        block = " ".join(lines[first:end])
        m = _STATE.search(block)
        state = m.group("s").split("+") if m else [""]
        healthy = state[0] in _SCONTROL_BASE_OK and set(state[1:]) <= _SCONTROL_FLAGS_OK
        if healthy and not _REASON.search(block):
            for j in range(first, end):
                out[j] = True


def _describe_node_blocks(lines: list[str], failing: list[bool], out: list[bool]) -> None:
    """`kubectl describe node` blocks (hosts_blocks.describe_node_spans: its "Name:" line to
    where kubectl's output of it ends) of a healthy node (see the module's sources), every line."""
    for first, end, _ in describe_node_spans(lines):
        if _healthy_node(lines[first:end]) and not any(failing[first:end]):
            out[first:end] = [True] * (end - first)


def _healthy_node(block: list[str]) -> bool:
    """A describe block's taints, schedulability and conditions show a healthy node."""
    fields = {
        k: v.strip() for ln in block if (m := _DESCRIBE_KEY.match(ln)) for k, v in [m.groups()]
    }
    if fields.get("Taints") != "<none>" or fields.get("Unschedulable") != "false":
        return False
    start = next((n for n, ln in enumerate(block) if ln.startswith("Conditions:")), None)
    if start is None:
        return False
    rows = []
    for ln in block[start + 1 :]:
        if not ln[:1].isspace():
            break
        cells = ln.split()
        if cells[:2] not in (["Type", "Status"], []) and not cells[0].startswith("-"):
            rows.append(cells[:2])
    ready = [s for t, s in rows if t == "Ready"]
    return ready == ["True"] and all(s == "False" for t, s in rows if t != "Ready")


def _prompt(line: str) -> re.Match[str] | None:
    return next((m for p in _PROMPTS if (m := p.match(line))), None)


def _owners(lines: list[str], failing: list[bool]) -> set[int]:
    """The prompt lines that own a failing line: the prompt above it, when something was typed
    there (lines below a prompt with nothing typed at it are no command's output), else, with
    no prompt above, the first prompt below (the terminal it was printed in, its prompt back)."""
    prompts = [(i, m) for i, line in enumerate(lines) if (m := _prompt(line))]
    owners: set[int] = set()
    above: tuple[int, bool] | None = None  # the last prompt line so far, and whether typed at
    n = 0
    for j, bad in enumerate(failing):
        while n < len(prompts) and prompts[n][0] <= j:
            i, m = prompts[n]
            above = (i, bool(lines[i][m.end() :].strip()))
            n += 1
        if not bad or (above and above[0] == j):
            continue
        if above is None and n < len(prompts):
            owners.add(prompts[n][0])
        elif above is not None and above[1]:
            owners.add(above[0])
    return owners


def _idle_prompts(
    lines: list[str], named: list[str | None], failing: list[bool], out: list[bool]
) -> None:
    """Prompt lines that name their prompt's host and own no failing line (_owners)."""
    owners = _owners(lines, failing)
    for i, line in enumerate(lines):
        host = named[i]
        m = _prompt(line) if host else None
        if m and host and host.lower() == m.group("h").lower() and i not in owners:
            out[i] = True


def _quiet_streams(
    named: list[str | None], prefixed: list[str | None], failing: list[bool], out: list[bool]
) -> None:
    """The lines of a pdsh-style "host: " stream none of whose lines is failing: pdsh puts the
    prefix on every line the host writes (hosts.prefix_hosts), so a failure without it is
    another stream's, not that host's output."""
    streams: dict[str, list[int]] = {}
    for i, host in enumerate(prefixed):
        if host and (named[i] or "").lower() == host.lower():
            streams.setdefault(host.lower(), []).append(i)
    for rows in streams.values():
        if not any(failing[i] for i in rows):
            for i in rows:
                out[i] = True


# a healthy run's progress lines, each from its emitter (module docstring)
_NCCL_INIT = (
    r"comm 0x[0-9a-f]+ rank \d+ nranks \d+ .*- Init (?:START|COMPLETE)$|Channel \d+/\d+ :[\d ]*$"
    r"|(?:Channel|Ring) \d+(?:/\d+)? : \d+(?:\[\w+\])? -> \d+(?:\[\w+\])? .*via \S+"
    r"|Trees |threadThresholds |\d+ coll channels|Connected all (?:rings|trees)$"
    r"|Setting affinity for GPU|cudaDriverVersion \d+$|Bootstrap : Using |NET/Plugin"
    r"|Using network |NET/\w+ : Using |NET/IB : No device found\.$|NCCL_\w+ set by environment to "
)
_PROGRESS = re.compile(
    # the host starts a word: unanchored, a long run of word characters is retried from each
    # of its positions (quadratic time on hostile input)
    rf"(?<![\w.-])[\w.-]+:\d+:\d+ \[\d+\] NCCL INFO (?:{_NCCL_INIT})"
    r"|^srun: launching (?:StepId=)?[\d.+]+ on host \S+, \d+ tasks?: \S+$"
    r"|The node '\S+' has joined round \d+ of the rendezvous '\S*' as rank \d+ in a world of "
    r"size \d+\.$"
    r"|^\[[\w.-]+:\d+\] MCW rank \d+ bound to "
    r"|^\{'loss': [\d.]+, .*'epoch': [\d.]+\}$"
    r"| systemd-logind\[\d+\]: New session \S+ of user \S+\.$|\sCRON\[\d+\]: \(\S+\) CMD \("
)


def progress_lines(lines: list[str], failing: list[bool]) -> list[bool]:
    """For each line, True when it is a healthy run's progress line (the module's sources)
    from which no failure was read (`failing`)."""
    pairs = zip(lines, failing, strict=True)
    return [not bad and _PROGRESS.search(ln) is not None for ln, bad in pairs]


def not_at_fault(
    lines: list[str], named: list[str | None], failing: list[bool], prefixed: list[str | None]
) -> list[bool]:
    """For each line, True when it names its host (`named`, each line's) only in a healthy
    status, as a prompt's that owns no failure, or in a "host: " stream (`prefixed`,
    hosts.prefix_hosts) with no failure; `failing`: whether an event was read from each line."""
    out = [False] * len(lines)
    _kubectl_tables(lines, out)
    _sinfo_rows(lines, out)
    _scontrol_blocks(lines, out)
    _describe_node_blocks(lines, failing, out)
    _idle_prompts(lines, named, failing, out)
    _quiet_streams(named, prefixed, failing, out)
    return out


# Open MPI's and PRRTE's "lost communication with a remote daemon" help text names the local
# side too: "  HNP daemon   : %s on node %s" above "  Remote daemon: %s on node %s" (open-mpi/ompi
# orte/mca/errmgr/base/help-errmgr-base.txt @097df599c547, openpmix/prrte
# src/mca/errmgr/base/help-errmgr-base.txt): the HNP's node only lost the remote one.
_HNP_SIDE = re.compile(r"^\s*HNP daemon\s*: \S+ on node \S+\s*$")


def losers(
    lines: list[str], named: list[str | None], failed: list[bool], lost: list[bool]
) -> set[str]:
    """The hosts (lower-case) some of whose lines (`named`, each line's host) were read as a
    failure (`failed`) and every such line only as a loss (`lost`: a timeout, a peer's error,
    reasoning_peers.reports_loss; the HNP side of a lost daemon): they show nothing of a fault
    that names no host."""
    hit: set[str] = set()
    own: set[str] = set()
    for line, host, bad, loss in zip(lines, named, failed, lost, strict=True):
        if host and _HNP_SIDE.match(line):
            hit.add(host.lower())
        elif host and bad:
            (hit if loss else own).add(host.lower())
    return hit - own
