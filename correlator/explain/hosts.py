"""Host names that a single line of text names, and only those (never guessed)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from correlator.explain.hosts_fields import (
    AWAY,
    FIELD_PATTERNS,
    MARKS,
    MORE_MARKS,
    MORE_PATTERNS,
    PATTERNS,
)
from correlator.explain.hosts_subject import SUBJECT_PATTERNS
from correlator.rules.hosts import every_hosts, placeholder_name

# A plausible host name: letters, digits, dots, dashes, underscores; not only dots/digits-dots
# like "..." (elided in a paste) and not placeholders such as "<none>" or "(null)".
_HOST_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,253}$")
_NOT_HOSTS = frozenset(
    {"localhost", "none", "null", "unknown", "kernel", "node", "host", "n/a", "nodes", "hostname"}
)

# A host masked in a paste ("xxxxxxxx", "XXXX-01", "***")
_MASKED = re.compile(r"^(?:[xX*]{3,}[\w.-]*|[\w.-]*[xX*]{4,})$")

_MARKS = (
    ":",
    "@",
    "node/",
    "NodeName=",
    "NodeList=",
    "***",
    "assigned ",
    "RUNNING AT",
    "exec_host=",
    "kubelet, ",
    "{kubelet ",
    "ip=",
    "hostname",
    "on node",
    "node ",
    "Node ",
    "evicted from ",
    "Process name: ",
    "failing host: ",
    *MARKS,
    *MORE_MARKS,
)
# bash's prompt up to the command typed at it: "[root@gpu-node-07 dir]#", "user@gpu-node-07:~$"
# (a virtualenv's "(venv) " in front); not past a ">", which ends fish's and SUSE's prompts
# (hosts_fields): a "$" or "%" in the command typed there is no prompt's end
BASH_PROMPT = r"^\s*(?:\([\w.-]+\)\s*)?\[?[\w.-]+@(?P<h>[A-Za-z0-9][\w.-]*)[: ][^\n#$%>]*?[#$%]"
_QUOTE = re.compile(r"^(?:\s*>\s?)+")
# Launcher labels in front of a rank's line: srun -l "12: ", mpirun --tag-output "[1,0]<stderr>:",
# torchrun --tee "[default0]:" / "[rank0]:" (they label a rank, not a host)
_LABEL = re.compile(r"^(?:\s*\d+: |\[\d+,\d+\]<std(?:out|err)>:\s?|\[(?:rank|default)\d+\]:\s?)+")

# journald / syslog (RFC 3164 and journalctl's short-iso): "Nov 22 12:00:00 gpu-07 kernel: ...",
# "Feb 02 09:51:48 gpu-07 slurmd[12912]: ...": timestamp, host, any program tag with its pid;
# also behind a pdsh/clush "host: " prefix ("gpu-07: Feb 02 09:51:48 gpu-07 kernel: ...");
# an ISO stamp finer than microseconds is kubectl's or docker's, never journalctl's; the
# month is strftime's %b in the reader's locale ("Nov", "nov.", "Mär", "ноя", "11月"). The
# field between the stamp and the tag is the host and nothing else (RFC 3164 4.1.2 HOSTNAME;
# RFC 1123 2.1 lets a name be all digits), so an all-digit host ("169") is taken here alone.
_SYSLOG = re.compile(
    r"^(?:[\w.-]+: )?(?:(?:[^\W\d_]{3,4}\.?|\d{1,2}月) +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?|"
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?!\.\d{7})\S*) "
    r"(?P<h>[A-Za-z0-9][\w.-]*) [\w./@-]{1,64}(?:\[\d+\])?: "
)
# A four-digit year where the host would be ("Nov 22 12:00:00 2024 ...", ctime's order) is a
# date, not a host.
_YEAR = re.compile(r"^(?:19|20)\d\d$")

# NCCL's debug prefix (NVIDIA/nccl src/debug.cc ncclDebugLog: "%s:%d:%d [%d] " host, pid, tid,
# cudaDev): "gpu-node-07:1234:5678 [0] NCCL ...", also behind a timestamp or with the pid:tid
# masked in a paste ("host-01:XXXXXX [5]"); each process (host and pid) writes its own stream
NCCL_PREFIX = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)?(?P<h>[A-Za-z0-9][\w.-]*):(?:(?P<pid>\d+):\d+|X{3,}) \[\d+\]"
)
# Each pattern captures the host in group "h"; the first that matches wins.
_LINE_PATTERNS: tuple[re.Pattern[str], ...] = (
    _SYSLOG,
    NCCL_PREFIX,
    # NCCL's prefix later in a line (behind a logger's timestamp or level): "... gpu-07:12:34 [0]
    # NCCL WARN ..." / "... gpu-07:12:34 [0] misc/socket.cc:58 NCCL WARN ..."
    re.compile(r"(?:^|\s)(?P<h>[A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\] (?:[\w/.]+:\d+ )?NCCL "),
    # UCX: "[gpu-node-07:31180:0:31180] ib_mlx5_log.c:143 ..." (the "[" sometimes lost in a paste),
    # and the three-field UCS_LOG_PROC_DATA_FMT "[%s:%-5d:%d]" (src/ucs/debug/log.c) before a
    # fatal signal, "[r104u33:4212 :0] Caught signal 11"
    re.compile(r"^\s*\[?(?P<h>[A-Za-z0-9][\w.-]*):\d+\s*:\d+:\d+\]\s"),
    re.compile(
        r"^\s*\[(?P<h>(?=[\w.-]{0,63}[A-Za-z])[A-Za-z0-9][\w.-]*):\d+\s*:\d+\] Caught signal \d"
    ),
    # UCX's log prefix (src/ucs/debug/log.c ucs_log_default_handler): "[%lu.%06lu] [%s:%-5d:%d]
    # %16s:%-4u UCX %-5s", e.g. "[1762045780.123456] [gpu-node-07:4711 :0]  ib_device.c:321 UCX"
    re.compile(r"^\s*\[\d+\.\d+\] \[(?P<h>[A-Za-z0-9][\w.-]*):\d+\s*:\d+\]\s"),
    # wall(1)/syslogd broadcast: "Message from syslogd@gpu-node-07 at Jun 17 13:06:42 ..."
    re.compile(r"^\s*Message from syslogd@(?P<h>[A-Za-z0-9][\w.-]*) at "),
    # slurmctld: "sched: Allocate JobId=12 NodeList=gpu-node-07 #CPUs=2" (one node, not a range)
    re.compile(r"\bNodeList=(?P<h>[A-Za-z0-9][\w.-]*)(?=\s|$)"),
    # torch elastic ChildFailedError block: "  host      : gpu-node-07"; the same entry pasted
    # onto one line keeps its field order (errors/__init__.py _FAILURE_FORMAT_TEMPLATE: time,
    # host, rank, exitcode): "... host : gpu-node-07 rank : 0 (local_rank: 0) exitcode : -9"
    re.compile(r"^\s*host\s*:\s*(?P<h>\S+)\s*$"),
    re.compile(r"\bhost\s*:\s*(?P<h>[A-Za-z0-9][\w.-]*)\s+rank\s*:\s*-?\d+"),
    # Slurm: "*** JOB 12 ON gpu-node-07 CANCELLED ..." / "STEPD TERMINATED ON gpu-node-07 AT" /
    # "... ON gpu-node-07 UNCORRECTABLE MEMORY ERROR AT ..." / "... ON gpu-node-07 FAILED (...)"
    re.compile(
        r"\*\*\* (?:JOB|STEP) \S+ (?:STEPD TERMINATED )?ON (?P<h>\S+) "
        r"(?:CANCELLED|AT|UNCORRECTABLE MEMORY ERROR|FAILED)\b"
    ),
    # scontrol show node / sinfo -N -l
    re.compile(r"\bNodeName=(?P<h>\S+)"),
    # kubectl describe node, Addresses section: "  Hostname:    gpu-node-07" (NodeHostName)
    re.compile(r"^\s*Hostname:\s+(?P<h>[A-Za-z0-9][\w.-]*)\s*$"),
    # kubectl describe pod: "Node:  gpu-node-07/10.0.0.7"
    re.compile(r"^\s*Node:\s+(?P<h>[A-Za-z0-9][\w.-]*)(?:/\S*)?\s*$"),
    # nccl-tests' checks (src/common.h): "gpu-07: Test NCCL failure common.cu:958 '...'"
    re.compile(r"^\s*(?P<h>[A-Za-z0-9][\w.-]*): Test (?:NCCL |CUDA )?failure [\w/.-]+:\d+"),
    # pdsh's own report about a remote host: "pdsh@login1: gpu-07: ssh exited with exit code 1"
    re.compile(r"^\s*pdsh@[\w.-]+: (?P<h>[A-Za-z0-9][\w.-]*): "),
    # shell prompt: "[root@gpu-node-07 dir]#", "user@gpu-node-07:~$", "user@gpu-node-07 ~ %", but
    # not when the command there queries the whole cluster or runs on other nodes (pdsh, clush,
    # pssh, ansible, mpirun, deepspeed, qsub, bsub: that host is a login or launch node) or views
    # a file written elsewhere (hosts_fields.AWAY, the same list zsh's and fish's prompts use)
    re.compile(BASH_PROMPT + rf"(?!\s*{AWAY})"),
    # kubectl events: "node/gpu-node-07"
    re.compile(r"\bnode/(?P<h>[A-Za-z0-9][\w.-]*)"),
    # kubectl events' older From column "kubelet, gpu-07" (formatEventSource, 1.7 on)
    re.compile(r"\bkubelet, (?P<h>[A-Za-z0-9][\w.-]*)"),
    re.compile(r"\bnodeName\"?\s*[:=]\s*\"?(?P<h>[A-Za-z0-9][\w.-]*)"),
    # a core/v1 Event's EventSource as the API server writes it (kubectl get events -o json,
    # one object a line): "source":{"component":"kubelet","host":"gpu-node-07"}, the node whose
    # kubelet reported the event
    re.compile(
        r"\"source\"\s*:\s*\{\s*\"component\"\s*:\s*\"[^\"]*\"\s*,\s*"
        r"\"host\"\s*:\s*\"(?P<h>[A-Za-z0-9][\w.-]*)\""
    ),
    # Open MPI: "[gpu-07:10319] *** Process received signal ***", BTL "[gpu-07][[1,2],3][..."
    # (not Alertmanager's notification subject "[FIRING:2] alertname ...", prometheus/alertmanager
    # template/default.tmpl __subject: the status upper-cased, ":" and the firing alerts' count)
    re.compile(r"^\s*\[(?!FIRING:)(?P<h>[A-Za-z][\w.-]*):\d+\] "),
    re.compile(r"^\s*\[(?P<h>[A-Za-z0-9][\w.-]*)\]\[\[\d+,\d+\],\d+\]\["),
    # Open MPI's BTL_PEER_ERROR before v5 (open-mpi/ompi opal/mca/btl/base/btl_base_error.h
    # @ead2efb13683abd87fdbf1fd1775c4a71d55ca80): "%s[%s:%d:%s] from %s " with the local
    # opal_process_info.nodename, then "to: %s " for the peer: the host after "from" logged it
    re.compile(r"\]\[[\w.-]+\.c:\d+:\w+\] from (?P<h>[A-Za-z0-9][\w.-]*) "),
    # Open MPI's "[host:pid] " of a host whose name opens with a digit (docker's default host
    # name, the container's id "036c56dce41b"; a node named by its dashed address "10-12-3-162"):
    # Open MPI and PRRTE print it "[%s:%05d] " (opal/util/stacktrace.c, "[%s:%05d] *** Process
    # received signal ***"), so the pid has 5 digits or more; a name with a letter or a dash in
    # it, never an "[address:port]", a "[12:34]" time or a date. The name is its whole [\w.-] run
    # (':' ends it), so the letter or dash is looked for once, ahead, not by a lazy run and a
    # greedy one splitting the name every way (quadratic on a long run)
    re.compile(r"^\s*+\[(?!\d{4}-\d\d-\d\d\b)(?P<h>\d(?=[\w.-]*?[A-Za-z-])[\w.-]*+):\d{5,}\] "),
    # PBS/Torque job mail "Exec host:  gpu-07/5", accounting "exec_host=gpu-07/0"
    re.compile(r"^\s*Exec host:\s+(?P<h>[A-Za-z0-9][\w.-]*)(?:/[\d+*-]+)?\s*$"),
    re.compile(r"\bexec_host=(?P<h>[A-Za-z0-9][\w.-]*)/"),
    # SGE qacct "hostname     node008" and ORTE's old "  hostname:  gpu-07"
    re.compile(r"^\s*hostname(?::\s*|\s+)(?P<h>[A-Za-z0-9][\w.-]*)\s*$"),
    # Ray: "Memory on the node (IP: 10.0.0.7, ID: ...)", "(ID: ..., IP: 10.0.0.7)",
    # "(raylet, ip=10.0.0.7)" / "(MyActor pid=12, ip=10.0.0.7)" prefixes (an actor's __repr__
    # in its name's place: "(MyActor(index=2) pid=12, ip=...)", delivery.RAY), "ip: ..."
    re.compile(r"\bIP: (?P<h>\d{1,3}(?:\.\d{1,3}){3})[,)]"),
    re.compile(
        r"^\s*\((?:raylet|[\w.]+(?:\([^()\n]{0,200}\))? pid=\d+|pid=\d+), ip=(?P<h>[\w.:-]+)\)"
    ),
    re.compile(r"^\s*ip:\s+(?P<h>\d{1,3}(?:\.\d{1,3}){3})\s*$"),
    # HPE Cray MPICH's abort prefix (ofiwg/libfabric#10072): "MPICH ERROR [Rank 12] [job id 1.0]
    # [Mon Mar  4 10:00:00 2024] [nid001234] - Abort(1) ...", an "[unknown]" field sometimes first
    re.compile(
        r"^\s*MPICH ERROR \[Rank \d+\] \[job id [^\]]*\] \[[^\]]*\] (?:\[unknown\] )?"
        r"\[(?P<h>[A-Za-z0-9][\w.-]*)\] - "
    ),
    # libfabric's cxi provider (ofiwg/libfabric prov/cxi/include/cxip.h _CXIP_WARN etc.: "%s: "
    # cxip_env.hostname after src/log.c's prefix, older releases without its time or prefix
    # field): "libfabric:123:1700000000::cxi:core:f():53<warn> nid001234: ..."
    re.compile(
        r"^\s*libfabric:\d+:(?:\d+:)?(?:[^:\s]*:)?cxi:\w+:[\w.]+\(\):\d+<\w+> "
        r"(?P<h>[A-Za-z0-9][\w.-]*): "
    ),
    # kubectl 1.6's describe Events table (kubernetes/kubernetes pkg/kubectl/describe.go,
    # release-1.6 DescribeEvents): its From column is the EventSource printed with %v
    re.compile(r"\{kubelet (?P<h>[A-Za-z0-9][\w.-]*)\}"),
    *FIELD_PATTERNS,
    *PATTERNS,
    *MORE_PATTERNS,
)
# The conventions that name a message's subject node (hosts_subject.py: the scheduler's
# assignment, srun's, mpirun's and Hydra's task nodes, slurmctld's and the node controller's
# node lines) are tried before those of the host that printed the line.
_ORDERED = (*SUBJECT_PATTERNS, *_LINE_PATTERNS)
# A leading ISO timestamp (docker/kubectl --timestamps) before the line proper.
_LEAD_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+")


def clean_host(value: str | None, *, numeric: bool = False) -> str | None:
    """The host name if `value` is a plausible one, else None; an all-digit name only where
    `numeric` says the slot it came from holds nothing but a host name."""
    if not value:
        return None
    value = value.strip().rstrip(":,;")
    digits = value.strip(".").isdigit() and "." not in value
    if not _HOST_OK.match(value) or (digits and (not numeric or _YEAR.match(value))):
        return None
    if value.lower() in _NOT_HOSTS or set(value) <= {"."} or _MASKED.match(value):
        return None
    if placeholder_name(value):
        return None
    return None if _every_hosts(value) else value


def _every_hosts(value: str) -> bool:
    # an address every host has names no node: an emitter that prints one (Ray's "Worker IP
    # address: 0.0.0.0") has not said which node it means, as a peer's would not (peer_host)
    try:
        return every_hosts(ipaddress.ip_address(value))
    except ValueError:
        return False


def host_in_line(line: str) -> str | None:
    """The host a line names by a known convention, or None."""
    if not any(mark in line for mark in _MARKS):
        return None  # every convention below needs one of these; most log lines have none
    line = _LABEL.sub("", _QUOTE.sub("", line))  # quoted pastes ("> ..."), rank labels
    bare = _LEAD_TS.sub("", line)
    for text in (line, bare) if bare != line else (line,):
        for pattern in _ORDERED:
            m = pattern.search(text)
            if m:
                host = clean_host(
                    m.group("h"), numeric=pattern is _SYSLOG or pattern in FIELD_PATTERNS
                )
                if host:
                    return host
    return None


# pdsh / DeepSpeed's pdsh runner / clush prefix each remote line with "host: ". Only a prefix
# that looks like a host (has a digit, and a letter or an IPv4 shape) and recurs (or stands in
# front of the relayed line's own timestamp) is taken. pdsh writes the host, ": ", then the
# remote line as it came (chaos/pdsh src/pdsh/dsh.c @21f5996: outf ("%S: %s", th->host, buf)),
# so a tab-indented line (ibstat's fields) keeps its tabs.
_PDSH = re.compile(r"^(?P<h>[A-Za-z0-9][\w.-]{2,62}): \t*\S")
_NOT_PDSH = re.compile(r"^(?:rank|task|line|step|epoch|iter|error|warn|info)\w*$", re.I)


def _pdsh_host(line: str) -> str | None:
    m = _PDSH.match(line)
    if not m:
        return None
    h = m.group("h")
    ipv4 = re.fullmatch(r"\d{1,3}(?:\.\d{1,3}){3}", h) is not None
    if _NOT_PDSH.match(h) or not any(c.isdigit() for c in h):
        return None
    if not ipv4 and not any(c.isalpha() for c in h):
        return None
    return clean_host(h)


def shared_prefix(line: str, nxt: str) -> str:
    """`nxt` without the pdsh-style "host: " prefix `line` opens with too (pdsh relays each
    remote line behind it, so a help text's wrapped tail carries it again), else `nxt`."""
    host = _pdsh_host(line)  # _PDSH's host, which clean_host returns as it is or refuses
    pre = f"{host}: " if host else ""
    return nxt[len(pre) :] if pre and nxt.startswith(pre) else nxt


_MIN_LOGGED = 20  # characters a host's line carries after its prefix, to count as a log line
# The relayed line's own clock right after the prefix ("gpu-02: [2024-03-20 20:31:29,269] [ERROR]
# ...", DeepSpeed's logger format, deepspeed/utils/logging.py @edaa7221): one such line is
# enough, the prefix being in front of a log line's own timestamp. The kernel's own clock counts
# too: printk's "[%5lu.%06lu]" (torvalds/linux kernel/printk/printk.c print_time @b17b0153,
# seconds right-aligned in at least five places: "[ 1234.567890]", so a list "[0.512345]" is
# not it), as plain `dmesg` prints it, and
# `dmesg -T`'s "[%s] " of strftime "%a %b %e %H:%M:%S %Y" (util-linux sys-utils/dmesg.c
# record_ctime @29e204d1; %e pads the day with a space: "[Mon Nov  7 10:11:12 2022]")
_OWN_CLOCK = re.compile(
    r"^[A-Za-z0-9][\w.-]{2,62}: (?:\[?\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d"
    r"|\[(?=[ \d]{5,}\.) *\d+\.\d{6}\]"
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\])"
)


# One "name: " line alone is pdsh's only when what follows is itself a fault message that a
# rule reads (pdsh -w gpu-n12 'nhc' relaying "ERROR: nhc: Health check failed: ..."; pdsh
# writes "%S: %s", the host and the remote line as it came, chaos/pdsh src/pdsh/dsh.c
# _flush_lines @21f5996). Names that open such lines by other conventions are never taken:
# a program's own "argv0: message" (GNU error(); python3, gcc-12, ld.lld-14), an exception's
# class ("Py4JJavaError: ..."), and the kernel's device names that drivers print in front of
# their messages ("nvidia-nvswitch3: SXid ...", "nvme0n1: ...", "eth0: ...", "mlx5_0: ...").
_NOT_SOLO = re.compile(
    r"^(?:python[\d.]*|pip\d*|perl[\d.]*|(?:\w+-linux-gnu-)?(?:gcc|cc|clang|nvcc)(?:-[\d.]+)?"
    r"|cc1\w*|ld(?:\.[a-z]+)*(?:-[\d.]+)?"
    r"|\w*(?:Error|Exception|Warning|Exit)|nvidia\d+|nvidia-nvswitch\d+|nvme\d+\w*|mlx\d_\d+"
    r"|sd[a-z]{1,2}\d*|md\d+|eth\d+|en[opsx]\w+|ib\d+|ibp\w+|ibs\d+|bnxt_re\d+|irdma\d+|hfi1_\d+"
    r"|(?:gpu|cuda|device|dev|card)\d+)$",
    re.I,
)


def _relays_fault(host: str, line: str, reads: Callable[[str], bool] | None) -> bool:
    """Whether `line`, a lone "host: " line, relays a fault message `reads` recognises."""
    if reads is None or _NOT_SOLO.match(host):
        return False
    return reads(line[len(host) + 2 :])


# A node pool's random instance suffix: GKE's "-dpv7" (4 characters), AKS's "vmss" + base-36,
# EC2 Auto Scaling names and Kubernetes' generated pod names ("-5xq2k"): short, letters and digits
_SUFFIX = re.compile(r"-[a-z0-9#]{1,6}$")


def _stem(host: str) -> str:
    """A host name's shape with its numbers and pool suffix blanked: gpu-02 and gpu-17 share
    "gpu-*", gke-pool-3f1a-dpv7 and gke-pool-3f1a-z35x share "gke-pool-#f#a-*"."""
    return _SUFFIX.sub("-*", re.sub(r"\d+", "#", host.lower()))


def prefix_hosts(lines: list[str], reads: Callable[[str], bool] | None = None) -> list[str | None]:
    """For each line, the host a recurring pdsh-style "host: " prefix names, if any: a prefix
    that recurs, one of several prefixes on different lines that share a name shape (pdsh
    over gpu-02..gpu-04, each host writing one line), one in front of the line's own clock, or
    one in front of a line that `reads` (the rules and parsers) finds a fault in by itself."""
    found = [_pdsh_host(line) for line in lines]
    counts: dict[str, int] = {}
    stems: dict[str, set[str]] = {}
    for h, line in zip(found, lines, strict=True):
        if h:
            counts[h] = counts.get(h, 0) + 1
            # a key: value dump ("layer1: 0.5", "layer2: 0.7") is not several hosts' log lines
            if len(line) - len(h) - 2 >= _MIN_LOGGED:
                stems.setdefault(_stem(h), set()).add(h.lower())
    kept = [
        h
        if h
        and (
            counts[h] >= 2
            or len(stems.get(_stem(h), ())) >= 2
            or _OWN_CLOCK.match(line)
            or _relays_fault(h, line, reads)
        )
        else None
        for h, line in zip(found, lines, strict=True)
    ]
    # a known host's indented lines ("gpu-07:     ECC Errors" of `nvidia-smi -q`) are its too
    known = {f"{h}: ": h for h in kept if h}
    return [
        _node_of_prefix(h or next((k for p, k in known.items() if line.startswith(p)), None))
        for h, line in zip(kept, lines, strict=True)
    ]


# slurmstepd's log prefix on a job's stderr is "slurmstepd-<NodeName>: " where slurmd runs
# several nodes on one host (SchedMD/slurm src/slurmd/slurmstepd/mgr.c, MULTIPLE_SLURMD:
# snprintf(argv0, ..., "slurmstepd-%s", conf->node_name); log_set_argv0(argv0)), and the
# same on sites that name it so: the node is the part after the dash
_STEPD_ARGV0 = re.compile(r"^slurmstepd-(?P<node>[A-Za-z0-9][\w.-]*)$")


def _node_of_prefix(prefix: str | None) -> str | None:
    """The node a kept prefix names: itself, or the node in slurmstepd's own argv0."""
    m = _STEPD_ARGV0.match(prefix) if prefix else None
    return clean_host(m.group("node")) or prefix if m else prefix


def distinct(hosts: list[str]) -> list[str]:
    """Hosts without repeats, compared case-insensitively, in first-seen order and spelling."""
    seen: dict[str, str] = {}
    for h in hosts:
        seen.setdefault(h.lower(), h)
    return list(seen.values())


# NCCL's init lines in which each host names its own addresses (its NCCL prefix in front), so a
# peer that another line names by address can be told to be that host. NVIDIA/nccl
# src/bootstrap.cc "Bootstrap: Using%s" (each interface " [%d]%s:%s"; older "Bootstrap : Using
# %s:%s"), src/transport/net_socket.cc "NET/Socket : Using%s" (the same list), and
# src/transport/net_ib/init.cc "NET/IB : Using%s %s; OOB %s:%s"; every address is
# ncclSocketToString's "addr<port>".
# The host from the start of its run (the lookbehind; what the run starts with before an ASCII
# letter or digit is passed over possessively), so that a long run is not retried at each place.
_NCCL_USING = re.compile(
    r"(?<![\w.-])(?:[^\WA-Za-z0-9]|[.-])*+(?P<h>[A-Za-z0-9][\w.-]*+):\d+:\d+ \[\d+\] NCCL INFO "
    r"(?:Bootstrap ?: ?Using|NET/Socket : Using|NET/IB : Using)(?P<rest>.*)"
)
_IF_ADDR = re.compile(r"(?:^|[\s\]])[\w.-]+:(?P<a>[0-9A-Fa-f:.]+)<\d+>")


def own_addresses(lines: list[str]) -> dict[str, str]:
    """Address (lower-case) -> the host whose own NCCL init line names it as its interface."""
    found: dict[str, str] = {}
    for line in lines:
        m = _NCCL_USING.search(line) if "NCCL INFO" in line else None
        host = clean_host(m.group("h")) if m else None
        if m and host:
            for a in _IF_ADDR.finditer(m.group("rest")):
                found.setdefault(a.group("a").lower(), host)
    return found
