"""Host conventions of probe set sixteen (issue #11): where a syslog transport, journalctl's other
output modes, zsh's, fish's and SUSE's default prompts, PBS's `qstat -f`, LSF's job report,
`hostnamectl` and Loki's `logcli` put the node a line came from. Each pattern captures the host
in group "h"; hosts.py tries them after its own and cleans what they capture.

Sources:
- RFC 5424 6 (SYSLOG-MSG = "<PRI>VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID
  SP STRUCTURED-DATA [SP MSG]", NILVALUE "-") and RFC 3164 4.1 ("<PRI>" in front of the
  TIMESTAMP HOSTNAME TAG of a relayed packet); rsyslog's RSYSLOG_ForwardFormat template
  ("<%PRI%>%TIMESTAMP:::date-rfc3339% %HOSTNAME% %syslogtag:1:32%%msg:::sp-if-no-1st-sp%%msg%",
  https://www.rsyslog.com/doc/configuration/templates.html, built-in templates);
- journalctl -o short-full ("Fri 2024-03-01 10:00:00 UTC host ident[pid]: "), short-unix
  (seconds since the epoch, "%.6f"), short-monotonic ("[%5llu.%06llu] host ident[pid]: ") and
  short-delta (the same with " <%5llu.%06llu>" inside the brackets):
  https://www.freedesktop.org/software/systemd/man/latest/journalctl.html (--output), laid out
  by systemd src/shared/logs-show.c output_short; -o verbose and -o export print each field
  "NAME=value", the node's in _HOSTNAME (systemd.journal-fields(7));
- zsh's default prompt PS1 "%m%# " (host up to its first dot, "%" or "#" for root):
  https://zsh.sourceforge.io/Doc/Release/Parameters.html (PS1, "The default is '%m%# '");
- fish's default prompt (fish-shell share/functions/fish_prompt.fish: prompt_login "user@host",
  " ", prompt_pwd, an optional " [status]", then ">" or "#" for root);
- SUSE's bash prompt (openSUSE/aaa_base files/etc/bash.bashrc: "user@host:dir> ", root's
  "host:dir # ");
- PBS Professional / Torque `qstat -f` ("    exec_host = node01/0*8", one "host/vnode*ncpus"
  chunk a host joined by "+"): PBS Professional Reference Guide, "Job Attributes" exec_host;
- IBM LSF job report (bsub -o) "Job was executed on host(s) <8*hostA>, in queue <q>, ..." and
  `bjobs -l` "Started 8 Task(s) on Host(s) <8*hostA>, ...": IBM Spectrum LSF documentation
  (bjobs -l output; "Job output" report header); several hosts are listed "<n*a> <n*b>";
- systemd `hostnamectl` ("   Static hostname: %s", "Transient hostname: %s"): systemd
  src/hostname/hostnamectl.c print_status_info;
- Grafana Loki `logcli query` default output ("<timestamp> <labels> <line>", the stream's labels
  as "{k="v", ...}"): https://grafana.com/docs/loki/latest/query/logcli/; the node is the label
  that promtail's and the Grafana Agent's documented journal and Kubernetes configs give it:
  host / hostname (__journal__hostname), node_name / nodename (__meta_kubernetes_pod_node_name).
"""

from __future__ import annotations

import re

_H = r"(?P<h>[A-Za-z0-9][\w.-]*)"
_TAG = r"[\w./@-]{1,64}(?:\[\d+\])?: "
# commands that query the whole cluster or run on other nodes: the prompt's host is a login node
# (FAN_OUT adds the PBS/LSF submitters and the MPI and DeepSpeed launchers given other hosts;
# every prompt convention, bash's, zsh's, fish's and SUSE's, skips all of them)
LOGIN_COMMANDS = (
    r"kubectl|oc|helm|sinfo|squeue|sacct|scontrol|sbatch|srun|salloc|ssh|pbsnodes|qstat|pdsh|"
    r"clush|clubak|pssh|parallel-ssh|ansible|ansible-playbook"
)
# An MPI or DeepSpeed launcher runs its ranks on the nodes of the host list it was given (Open
# MPI's -H/--host/--hostfile/--machinefile, Hydra's -f/-hosts, DeepSpeed's -H/--hostfile,
# --include, --num_nodes); with none, Open MPI and Hydra start every rank on the local host
# (outside a resource manager's allocation), so the prompt's host is where they ran.
_LAUNCH_ELSEWHERE = (
    r"(?:mpirun|mpiexec(?:\.hydra)?|orterun|prterun|deepspeed)\b(?=[^\n]*?\s"
    r"(?:-H|--?hosts?|--?hostfile|--?machinefile|-f|--default-hostfile|--include|--exclude|"
    r"--num_nodes)(?:[\s=]|$))"
)
FAN_OUT = rf"(?:sudo\s+)?(?:{LOGIN_COMMANDS}|qsub|bsub|bjobs|bhosts|{_LAUNCH_ELSEWHERE})\b"
# A file viewed at a prompt ("tail -f slurm-1234.out", "less train.log") shows what the file
# holds, written wherever the job ran (often shared storage read from a login node), not the
# prompt host's own output; the host's own logs and kernel files (/var/log, /proc, /sys) stay
# its own (coreutils cat/head/tail, less, grep: they print the file as it is).
VIEWS_ELSEWHERE = (
    r"(?:sudo\s+)?(?:cat|tac|head|tail|less|more|zcat|zless|zmore|grep|egrep|fgrep|zgrep|vim?|"
    r"view)\b(?![^\n]*(?:/var/log/|/proc/|/sys/))"
)
AWAY = rf"(?:{FAN_OUT}|{VIEWS_ELSEWHERE})"
# zsh's and fish's default prompts up to the command typed at them (see PATTERNS); zsh's host
# holds a digit (the lookahead) and is read possessively, linear on a long run of word characters
ZSH_PROMPT = r"^\s*(?P<h>[A-Za-z](?=[\w-]*\d)[\w-]*+)[%#] "
FISH_PROMPT = r"^\s*[\w.-]+@" + _H + r" (?:~|/)\S*(?: \[\d+\])?> "
# SUSE's bash prompt, the default of SLES-based login nodes (HPE Cray EX's among them):
# openSUSE/aaa_base files/etc/bash.bashrc sets PS1="${_t}${_u}:\w${_p} " with _u "\u@\h" and
# _p ">" for a user, _u "\h" and _p " #" for root (its ksh/ash branches print the same
# "user@host:dir> " and "host:dir # "): "alice@nid002070:/scratch/run> cmd", "nid002070:~ # cmd".
# \w is "~", "~/dir" or an absolute path ("//" opens a URL, not a directory); "->" and "=>"
# are arrows, not the prompt's end. Root's prompt has no "user@", so its host must hold a digit,
# as zsh's does ("word:/path # " is a path and a comment, not a prompt).
SUSE_PROMPT = r"^\s*[\w.-]+@" + _H + r":(?:~|/(?!/))\S*(?<![-=])> "
SUSE_ROOT_PROMPT = r"^\s*(?P<h>[A-Za-z0-9](?=[\w.-]*\d)[\w.-]*+):(?:~|/(?!/))\S* # "

# Patterns whose host slot holds nothing but a host name (an all-digit name is taken there).
FIELD_PATTERNS: tuple[re.Pattern[str], ...] = (
    # RFC 5424: "<11>1 2024-03-01T10:00:00.123456+00:00 gpu-07 kernel - - - msg"
    re.compile(r"^\s*<\d{1,3}>\d{1,2} \S+ " + _H + r" \S+ \S+ \S+ (?:-|(?:\[[^\]]*\])+)(?: |$)"),
    # "<PRI>" in front of an RFC 3164 header or rsyslog's RSYSLOG_ForwardFormat
    re.compile(
        r"^\s*<\d{1,3}>(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) "
        + _H
        + " "
        + _TAG
    ),
    # journalctl -o short-full: weekday, date, time, zone
    re.compile(
        r"^\s*[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? [A-Za-z+-][\w+-]* "
        + _H
        + " "
        + _TAG
    ),
    # journalctl -o short-unix
    re.compile(r"^\s*\d{9,11}\.\d{6} " + _H + " " + _TAG),
    # journalctl -o short-monotonic / short-delta: the kernel's own "[ 12.345678] driver dev: "
    # has the same clock, so only the kernel's identifier or a tag with its pid is taken
    re.compile(
        r"^\s*\[ *\d+\.\d{6}(?: <[ \d]+\.\d{6}>)?\] " + _H + r" (?:kernel|[\w./@-]{1,64}\[\d+\]): "
    ),
    # journalctl -o verbose / -o export: the entry's "_HOSTNAME=gpu-07" field
    re.compile(r"^\s*_HOSTNAME=" + _H + r"\s*$"),
)

PATTERNS: tuple[re.Pattern[str], ...] = (
    # zsh's default prompt "gpu-07% cmd" / "gpu-07# cmd" (the name has a digit: "Total% " is
    # a word, not a host)
    re.compile(ZSH_PROMPT + r"(?!\s*" + AWAY + r")[\w./~-]"),
    # fish's default prompt "alice@gpu-07 ~/train> cmd", "alice@gpu-07 ~ [1]> cmd"
    re.compile(FISH_PROMPT + r"(?!\s*" + AWAY + r")\S"),
    # SUSE's prompt "alice@nid002070:~/train> cmd", root's "nid002070:~ # cmd"
    re.compile(SUSE_PROMPT + r"(?!\s*" + AWAY + r")\S"),
    re.compile(SUSE_ROOT_PROMPT + r"(?!\s*" + AWAY + r")\S"),
    # qstat -f: "    exec_host = gpu-07/0*8" (one host; "a/0*8+b/0*8" names several)
    re.compile(r"^\s*exec_host = " + _H + r"/[\d*]+\s*$"),
    # LSF: one host only (a second "<n*host>" would follow the first before the comma)
    re.compile(r"\bexecuted on host\(s\) <(?:\d+\*)?" + _H + r">,"),
    re.compile(
        r"\b(?:Started|Dispatched(?: to)?) \d+ Task\(s\) on Host\(s\) <(?:\d+\*)?"
        + _H
        + r"(?:@[\w.-]+)?>(?:,|;|\s*$)"
    ),
    # LSF's older job history: "Started on <hostA>, Execution Home ...", multicluster
    # "<hostC@cluster3>", "Started on 8 Hosts/Processors <8*hostA>", bhist's "Dispatched to
    # <hostA>" (IBM Spectrum LSF bjobs -l and bhist -l examples); one host only
    re.compile(
        r"\b(?:Started on|Dispatched to)(?: \d+ Hosts/Processors)? <(?:\d+\*)?"
        + _H
        + r"(?:@[\w.-]+)?>(?:,|;|\s*$)"
    ),
    # hostnamectl
    re.compile(r"^\s*(?:Static|Transient) hostname:\s+" + _H + r"\s*$"),
    # logcli: "2024-03-01T10:00:00Z {host="gpu-07", job="syslog"} msg" (one node label only)
    re.compile(
        r"^\s*(?:\d{4}-\d\d-\d\dT\S+\s+)?\{(?![^{}]*\b(?:host|hostname|node_name|nodename)="
        r"[^{}]*\b(?:host|hostname|node_name|nodename)=)[^{}]*\b(?:host|hostname|node_name|"
        r"nodename)=\"" + _H + r"\"[^{}]*\} "
    ),
)

MARKS = (
    "% ",
    "# ",
    "> ",
    "_HOSTNAME=",
    "exec_host",
    "ost(s) <",
    '="',
    "Started on ",
    "Dispatched to ",
)

# `kubectl events` (kubectl pkg/cmd/events, events.k8s.io): its OBJECT column is "Kind/name",
# the kind as spelt ("Node/gpu-07", "Pod/trainer-0"), where `kubectl get events` prints the
# lower-case resource ("node/gpu-07", read in hosts.py); Open MPI's show_help texts name the
# process's own host "  Local host: %s" (help-mpi-btl-openib.txt [no active ports found],
# help-mtl-ofi.txt [OFI call fail], help-mpi-btl-openib-cpc-base.txt [no cpcs for port]; a
# "Peer host:"/"Remote host:" beside it is the peer, which the rules name themselves);
# slurmctld's node_mgr.c validate_node_specs "Setting node %s state to INVAL with reason:%s"
# and "%s: Prolog or job env setup failure on node %s, draining the node" (SchedMD/slurm
# src/slurmctld/node_mgr.c)
# slurmstepd's own argv0 where slurmd runs several nodes on one host ("slurmstepd-<NodeName>: ",
# SchedMD/slurm src/slurmd/slurmstepd/mgr.c, cited in hosts.py _STEPD_ARGV0): one such line
# names its node, as the recurring prefix does
NAMED_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^\s*slurmstepd-" + _H + r": "),
    # MVAPICH2's PRINT_ERROR prefix "[%s][%s] " (output prefix, function; kumattau/mvapich2
    # src/mpid/ch3/channels/common/include/debug_utils.h @7b3539c4): an mpispawn's
    # "<gethostname()>:mpispawn_<id>" (src/pm/mpirun/mpispawn.c) or a rank's
    # "<host>:mpi_rank_<rank>" (src/mpid/ch3/channels/common/src/ft/cr.c); never mpirun_rsh's
    # "<host>:mpirun_rsh", the launching host, which reports other nodes' aborts
    re.compile(r"^\s*\[" + _H + r":(?:mpispawn(?:_wa|_mig)?|mpi_rank)_\d+\]\[\w+\] "),
    re.compile(r"(?<![\w/])Node/" + _H + r"(?=\s|$)"),
    re.compile(r"^\s*Local host:\s+" + _H + r"\s*$"),
    re.compile(r"\bSetting node " + _H + r" state to INVAL with reason:"),
    re.compile(r"\bsetup failure on node " + _H + r", draining the node\b"),
)

# Slurm's allocation (salloc/srun "Nodes %s are ready for job", the allocation's node list: one
# node, never a folded set "gpu[15,19]"), `uname -a` (coreutils src/uname.c: kernel name, the
# node name, release, "#" version ...), the batch node in an `env` dump (sbatch(1) OUTPUT
# ENVIRONMENT VARIABLES: SLURMD_NODENAME "Name of the node running the job script",
# SLURM_JOB_NODELIST / SLURM_NODELIST "List of nodes allocated to the job", one node only), and
# Alertmanager's default notification text (prometheus/alertmanager template/default.tmpl
# __text_alert_list: "Labels:" then " - {{ .Name }} = {{ .Value }}" a label, the node in
# dcgm-exporter's "Hostname" label or a "node"/"nodename"/"host"/"hostname" one; "instance" is
# the scraped target's address, the exporter pod's own in Kubernetes, and is not taken)
MORE_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^\s*(?:salloc|srun)(?:\.exe)?: Nodes " + _H + r" are ready for job\b"),
    re.compile(r"^\s*Linux " + _H + r" \d+\.\d+\.\d[\w.+~-]* #\d+"),
    re.compile(r"^\s*(?:export\s+)?SLURMD_NODENAME=" + _H + r"\s*$"),
    re.compile(r"^\s*(?:export\s+)?SLURM_(?:JOB_)?NODELIST=" + _H + r"\s*$"),
    re.compile(r"^\s*-\s+(?:[Hh]ostname|host|node|nodename)\s+=\s+" + _H + r"\s*$"),
    # UCCL's logger (uccl-project/uccl include/util/debug.h UCCLLogger::log / vlog): "[" level,
    # " " subsystem for INFO, " " gethostname(), " " pid, " " thread id, " " function, " "
    # file ":" line "] " message, e.g. "[WARN gpu-07 4711 4711 pollOnce rdma/x.cc:203] ...";
    # vlog's "[VLOG(n) gpu-07 4711 4711 f x.cc:12] "
    re.compile(
        r"^\s*\[(?:(?:FATAL|ERROR|WARN|INFO)(?: (?:INIT|AFXDP|DPDK|EFA|RDMA|EP|P2P|UTIL))?|"
        r"VLOG\(\d+\)) " + _H + r" \d+ \d+ [\w:~<>]+ [\w./+-]+:\d+\] "
    ),
    *NAMED_PATTERNS,
)
MORE_MARKS = (
    "are ready for job",
    "Linux ",
    "NODENAME=",
    "NODELIST=",
    " = ",
    "Node/",
    "Local host:",
    "Setting node ",
    "failure on node ",
    "slurmstepd-",
)

# `hostname` (and `hostname -s`/`-f`) typed at a prompt ("$ hostname", "[root@x ~]# hostname"),
# its output the next line: the node the session is on
_HOSTNAME_CMD = re.compile(r"^\s*(?:\S*[$#%>]\s*)hostname(?:\s+-[sf])?\s*$")
_ONE_NAME = re.compile(r"^\s*(?P<h>[A-Za-z0-9][\w.-]*)\s*$")


# A command typed at a prompt that runs on one other node, its output that node's: ssh(1)
# (OpenBSD ssh.1 SYNOPSIS: "ssh [-46AaCfGgKkMNnqsTtVvXxYy] [-B bind_interface] ... [-w
# local_tun[:remote_tun]] destination [command [argument ...]]", destination "[user@]hostname")
# and srun(1) "-w, --nodelist=<node_name_list>" naming one node (not a folded set, a list or a
# file, and no -N/--nodes above 1)
_REMOTE_CMD = re.compile(r"^[^$#%>\n]{0,80}[$#%>] ?(?:sudo\s+)?(?P<cmd>ssh|srun)\s+(?P<args>.+)$")
_SSH_ARG_OPTS = frozenset("BbcDEeFIiJLlmOoPpRSWw")
_SRUN_NODES = re.compile(r"(?:^|\s)(?:-w\s*|--nodelist[=\s])(?P<h>[A-Za-z0-9][\w.-]*)(?=\s|$)")
_SRUN_MANY = re.compile(r"(?:^|\s)(?:-N\s*|--nodes[=\s])(?!1(?:\s|$))\d")


def _ssh_destination(args: list[str]) -> str | None:
    """The host of ssh's destination argument, its options (and their values) skipped."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and len(arg) > 1:
            # an option taking a value takes the next word unless it is glued on ("-p22")
            i += 2 if arg[-1] in _SSH_ARG_OPTS and arg[1:].isalpha() else 1
            continue
        return arg.rsplit("@", 1)[-1].removeprefix("ssh://").split(":", 1)[0]
    return None


def _remote_host(line: str) -> str | None:
    """The one node a prompt's ssh or srun command line runs on, as written, or None."""
    m = _REMOTE_CMD.match(line)
    if not m:
        return None
    args = m.group("args")
    if m.group("cmd") == "ssh":
        return _ssh_destination(args.split())
    nodes = _SRUN_NODES.search(args)
    return nodes.group("h") if nodes and not _SRUN_MANY.search(args) else None


def session_hosts(lines: list[str]) -> list[str | None]:
    """For each line, the node a shell session shows it is about, as written (the caller cleans
    it): the output of a `hostname` typed at a prompt (one line, not a list of several nodes'
    names), or the one node a prompt's ssh / srun -w command runs on."""
    out: list[str | None] = [None] * len(lines)
    for i, line in enumerate(lines):
        if "ssh" in line or "srun" in line:
            out[i] = out[i] or _remote_host(line)
        if i + 1 < len(lines) and _HOSTNAME_CMD.match(line):
            m = _ONE_NAME.match(lines[i + 1])
            after = lines[i + 2] if i + 2 < len(lines) else ""
            if m and not _ONE_NAME.match(after):  # srun hostname prints every node's, one a line
                out[i + 1] = m.group("h")
    return out
