"""Host names that a single line of text names, and only those (never guessed)."""

from __future__ import annotations

import re

# A plausible host name: letters, digits, dots, dashes, underscores; not only dots/digits-dots
# like "..." (elided in a paste) and not placeholders such as "<none>" or "(null)".
_HOST_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,253}$")
_NOT_HOSTS = frozenset(
    {"localhost", "none", "null", "unknown", "kernel", "node", "host", "n/a", "nodes", "hostname"}
)

_MARKS = (":", "@", "node/", "NodeName=", "NodeList=", "***", "assigned ")
_QUOTE = re.compile(r"^(?:\s*>\s?)+")

# Each pattern captures the host in group "h"; the first that matches wins.
_LINE_PATTERNS: tuple[re.Pattern[str], ...] = (
    # journald / syslog: "Nov 22 12:00:00 gpu-node-07 kernel: ..."
    re.compile(
        r"^(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?|\d{4}-\d\d-\d\dT\S+) "
        r"(?P<h>[A-Za-z0-9][\w.-]*) (?:kernel|slurmd|slurmstepd|kubelet|nvidia-\w+|dcgm\w*)"
        r"(?:\[\d+\])?:"
    ),
    # NCCL: "gpu-node-07:1234:5678 [0] NCCL ...", also behind a timestamp or with the pid:tid
    # masked in a paste ("host-01:XXXXXX [5]")
    re.compile(r"^\s*(?:\[[^\]]*\]\s*)?(?P<h>[A-Za-z0-9][\w.-]*):(?:\d+:\d+|X{3,}) \[\d+\]"),
    # UCX: "[gpu-node-07:31180:0:31180] ib_mlx5_log.c:143 ..." (the "[" sometimes lost in a paste)
    re.compile(r"^\s*\[?(?P<h>[A-Za-z0-9][\w.-]*):\d+\s*:\d+:\d+\]\s"),
    # wall(1)/syslogd broadcast: "Message from syslogd@gpu-node-07 at Jun 17 13:06:42 ..."
    re.compile(r"^\s*Message from syslogd@(?P<h>[A-Za-z0-9][\w.-]*) at "),
    # Kubernetes scheduler event: "Successfully assigned ns/pod to gpu-node-07"
    re.compile(r"Successfully assigned \S+ to (?P<h>[A-Za-z0-9][\w.-]*)\s*$"),
    # slurmctld: "sched: Allocate JobId=12 NodeList=gpu-node-07 #CPUs=2" (one node, not a range)
    re.compile(r"\bNodeList=(?P<h>[A-Za-z0-9][\w.-]*)(?=\s|$)"),
    # torch elastic ChildFailedError block: "  host      : gpu-node-07"
    re.compile(r"^\s*host\s*:\s*(?P<h>\S+)\s*$"),
    # Slurm: "*** JOB 12 ON gpu-node-07 CANCELLED ..." / "STEPD TERMINATED ON gpu-node-07 AT"
    re.compile(r"\*\*\* (?:JOB|STEP) \S+ (?:STEPD TERMINATED )?ON (?P<h>\S+) (?:CANCELLED|AT)\b"),
    # srun: "srun: error: gpu-node-07: task 4: Out Of Memory"
    re.compile(r"srun: error: (?P<h>[A-Za-z0-9][\w.-]*): tasks? [\d,-]+"),
    # scontrol show node / sinfo -N -l
    re.compile(r"\bNodeName=(?P<h>\S+)"),
    # kubectl describe pod: "Node:  gpu-node-07/10.0.0.7"
    re.compile(r"^\s*Node:\s+(?P<h>[A-Za-z0-9][\w.-]*)(?:/\S*)?\s*$"),
    # shell prompt: "[root@gpu-node-07 dir]#", "user@gpu-node-07:~$", "user@gpu-node-07 ~ %", but
    # not when the command there queries the whole cluster (that host is a login node)
    re.compile(
        r"^\s*(?:\([\w.-]+\)\s*)?\[?[\w.-]+@(?P<h>[A-Za-z0-9][\w.-]*)[: ][^\n#$%]*?[#$%]"
        r"(?!\s*(?:sudo\s+)?(?:kubectl|oc|helm|sinfo|squeue|sacct|scontrol|sbatch|srun|salloc|"
        r"ssh|pbsnodes|qstat)\b)"
    ),
    # kubectl events: "node/gpu-node-07"
    re.compile(r"\bnode/(?P<h>[A-Za-z0-9][\w.-]*)"),
)


def clean_host(value: str | None) -> str | None:
    """The host name if `value` is a plausible one, else None."""
    if not value:
        return None
    value = value.strip().rstrip(":,;")
    if not _HOST_OK.match(value) or (value.strip(".").isdigit() and "." not in value):
        return None
    if value.lower() in _NOT_HOSTS or set(value) <= {"."}:
        return None
    return value


def host_in_line(line: str) -> str | None:
    """The host a line names by a known convention, or None."""
    if not any(mark in line for mark in _MARKS):
        return None  # every convention below needs one of these; most log lines have none
    line = _QUOTE.sub("", line)  # logs pasted as e-mail/markdown quotes ("> ...")
    for pattern in _LINE_PATTERNS:
        m = pattern.search(line)
        if m:
            host = clean_host(m.group("h"))
            if host:
                return host
    return None


def distinct(hosts: list[str]) -> list[str]:
    """Hosts without repeats, compared case-insensitively, in first-seen order and spelling."""
    seen: dict[str, str] = {}
    for h in hosts:
        seen.setdefault(h.lower(), h)
    return list(seen.values())
