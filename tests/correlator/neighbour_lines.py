"""Put healthy neighbours into a log: the lines other hosts of the same job or cluster print
while one host fails. Used by test_explain_neighbours_metamorphic.py.

A real multi-node log is seldom one host's alone: every rank's NCCL init, every node's syslog,
every task's training steps are in it. The failing host's lines are kept as they are, and
healthy lines of 1-3 other hosts go around and between them:
- in the style of the culprit's own lines when they have one that names their host (NCCL's
  "host:pid:tid [dev]" prefix, a syslog line's host column, Open MPI's "[host:pid]", pdsh's
  "host: ", a `kubectl get nodes` or `sinfo` row, Ray's "(Actor pid=N, ip=A)"), behind the
  same delivery prefix (`mpirun --tag-output`'s "[1,N]<stdout>:", a timestamp) the culprit's
  line has: before its first such line, after its last and between two (a table's rows in
  name order, each node once; Open MPI's bindings before, as they are printed at launch);
- else, the failing lines name their host some other way (a peer's address in a message, a
  "host :" field, a prompt, a describe block), as plain lines that name the other host the way
  a healthy run of the same tools does: Slurm's srun -v launch line, torch elastic's
  rendezvous line, Ray's worker lines, NCCL's init lines, before the log, after it and where a
  paragraph starts (never inside one message: a traceback, a banner, a wrapped line); or, for
  Kubernetes, a `kubectl get pods -o wide` pasted above it with a pod running on each.

The other hosts follow the culprit's naming: the same name with another number ("gpu004" ->
"gpu011"), another address in the same network, or a numbered sibling of a bare name; never a
host the text already names. Deterministic: seeded by the case's file name and the variant.

Healthy content, each from its emitter:
- NCCL (NVIDIA/nccl src/debug.cc ncclDebugLog: "%s:%d:%d [%d] NCCL INFO " host, pid, tid,
  cudaDev): src/graph/rings.cc ncclBuildRings "Channel %02d/%02d : " and each rank of the ring
  (printed by rank 0 only), src/transport/p2p.cc "Channel %02d : %d[%lx] -> %d[%lx] via
  P2P/IPC%s" (every rank, its own link), "Connected all rings" (src/init.cc), src/init.cc
  "comm %p rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE" (2.x before 2.12 added
  nvmlDev and commId), src/bootstrap.cc "Bootstrap : Using%s" with "%s:%s<0>" (interface,
  address);
- Hugging Face transformers' Trainer (src/transformers/trainer_callback.py ProgressCallback
  on_log: the logs dict as str(): "{'loss': 0.4213, 'grad_norm': ..., 'learning_rate': ...,
  'epoch': ...}");
- syslog: systemd-logind (systemd src/login/logind-session.c "New session %s of user %s.")
  and cron (Debian's sysstat /etc/cron.d/sysstat "command -v debian-sa1 > /dev/null &&
  debian-sa1 1 1", logged by cron as "(root) CMD (%s)");
- Slurm srun -v (SchedMD/slurm src/api/step_launch.c "launching %ps on host %s, %u tasks: %s");
- torch elastic (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py "The node '%s'
  has joined round %d of the rendezvous '%s' as rank %d in a world of size %d.", the node
  "{addr}_{pid}_{local_id}", through logging's BASIC_FORMAT "%(levelname)s:%(name)s:%(message)s");
- `kubectl get nodes` and `kubectl get pods -o wide` (kubernetes pkg/printers/internalversion/
  printers.go printNode, a Ready node's row; printPod, a Running pod's) and `sinfo` (SchedMD/
  slurm src/sinfo: an "idle" row), as correlator/explain/hosts_health.py cites;
- Open MPI's --report-bindings (open-mpi/ompi v4.x orte/mca/ess/base/ess_base_fns.c
  orte_ess_base_proc_binding: opal_output(0, "MCW rank %d bound to %s: %s", vpid, cset2str,
  cset2mapstr), behind opal_output's "[host:pid] " prefix), printed as the ranks start;
- Ray's worker log prefix (ray python/ray/_private/worker.py print_worker_logs:
  "({actor name} pid={pid}, ip={ip})") before a worker's training line.
"""

from __future__ import annotations

import ipaddress
import random
import re
import zlib
from dataclasses import dataclass

from tests.correlator.host_rename import token

# A style names the host in the culprit's line; `pre` is whatever delivery prefix is before it.
_NCCL = r":\d+:\d+ \[\d+\] "
_SYSLOG_TS = re.compile(r"(?P<ts>(?:[A-Z][a-z]{2}|\d{1,2}月) +\d{1,2} \d\d:\d\d:\d\d) $")
_NODE_STATES = r"(?:NotReady|Ready|Unknown)(?:,SchedulingDisabled)?"
_SINFO_STATES = r"(?:down|drain|drng|drained|draining|fail|failing|alloc|mix|idle)\*?"
_RAY = re.compile(r"\((?P<actor>\w+ )?pid=(?P<pid>\d+), ip=$")


@dataclass(frozen=True)
class Style:
    """How the culprit's line names it: the text before and after the host on that line."""

    kind: str
    pre: str  # the line up to the host
    post: str  # the line after it
    width: int = 0  # the culprit's own length (a table row's NAME cell)


def _style(line: str, m: re.Match[str]) -> Style | None:
    pre, post = line[: m.start()], line[m.end() :]
    if re.match(_NCCL, post):
        return Style("nccl", _delivery(pre), post)
    if (ts := _SYSLOG_TS.search(pre)) and re.match(r" [\w.@/-]+(?:\[\d+\])?: ", post):
        return Style("syslog", pre[: ts.start()], ts.group("ts"))
    if re.fullmatch(r"\s*", pre) and re.match(rf"\s+{_NODE_STATES}\s", post):
        return Style("kube_node_row", pre, post, len(m.group()))
    if re.search(rf"\s{_SINFO_STATES}\s+$", pre) and not post.strip():
        return Style("sinfo_row", pre, post)
    if pre.endswith("[") and re.match(r":\d+\] ", post):
        return Style("ompi", _delivery(pre[:-1]) + "[", post)
    if _RAY.search(pre) and post.startswith(") "):
        return Style("ray", pre, post)
    if post.startswith(": ") and _delivery(pre) == pre:
        return Style("pdsh", pre, post)
    return None


# a delivery prefix in front of an emitter's own line: mpirun --tag-output's "[1,N]<stdout>:",
# torch's "[rankN]:", srun --label's "N: ", a bracketed or ISO timestamp, a quote's "> ",
# indentation
_DELIVERY = re.compile(
    r"^(?:\s+|> ?|\[\d+,\d+\]<std(?:out|err)>:|\[rank\d+\]:|\s*\d+: |\[[\d :.T-]+\] ?)*$"
)


def _delivery(pre: str) -> str:
    return pre if _DELIVERY.match(pre) else ""


def _varied_delivery(pre: str, rng: random.Random) -> str:
    """The culprit's delivery prefix for another process: another rank's number in it."""
    return re.sub(
        r"(\[\d+,|\[rank|^\s*)(\d+)(?=\]|: )",
        lambda m: f"{m.group(1)}{rng.randrange(8, 64)}",
        pre,
    )


def _shifted_name(name: str, k: int, taken: str) -> str:
    """`name` with another number in its last run of digits (same width), or a numbered
    sibling of a name without digits; one `taken` (the text, lower-cased) does not hold."""
    short, dot, domain = name.partition(".")
    runs = list(re.finditer(r"\d+", short))
    for step in range(k, k + 200):
        if runs:
            r = runs[-1]
            width = len(r.group())
            num = (int(r.group()) + step * 7) % (10**width) if width > 1 else (step % 9) + 1
            new = f"{short[: r.start()]}{num:0{width}d}{short[r.end() :]}"
        else:
            new = f"{short}-{step + 1}"
        cand = new + dot + domain
        if new.lower() != short.lower() and not re.search(
            rf"(?<![\w.-]){re.escape(new.lower())}(?![\w-])", taken
        ):
            return cand
    raise AssertionError("no free neighbour name")


def _shifted_address(addr: str, k: int, taken: str) -> str:
    ip = ipaddress.ip_address(addr.split("%")[0])
    zone = addr[len(addr.split("%")[0]) :]
    for step in range(k, k + 200):
        if ip.version == 4:
            head, last = str(ip).rsplit(".", 1)
            cand = f"{head}.{(int(last) + step * 13 - 1) % 253 + 1}"
        else:
            cand = str(ipaddress.ip_address(int(ip) ^ (step * 0x1F3 + 1))) + zone
        if cand != addr and cand.lower() not in taken:
            return cand
    raise AssertionError("no free neighbour address")


def neighbours(culprit: str, text: str, count: int, rng: random.Random) -> list[str]:
    """`count` other hosts named as the culprit is, none of which the text names."""
    taken = text.lower()
    out: list[str] = []
    for _ in range(count):
        k = rng.randrange(1, 40)
        shift = _shifted_address if _is_address(culprit) else _shifted_name
        new = shift(culprit, k, taken)
        taken += "\n" + new.lower()
        out.append(new)
    return out


def _train_step(rng: random.Random) -> str:
    step = rng.randrange(10, 900)
    return (
        f"{{'loss': {rng.uniform(0.8, 2.4):.4f}, 'grad_norm': {rng.uniform(0.3, 4):.6f}, "
        f"'learning_rate': {rng.choice(('4.2e-05', '1.9e-05', '9.8e-06'))}, "
        f"'epoch': {step / 1000:.2f}}}"
    )


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return True


def _nccl_info(host: str, rank: int, nranks: int, rng: random.Random) -> list[str]:
    # a host named by its address is a node whose host name is its dashed address (EC2's
    # "ip-10-1-23-4"); NCCL's bootstrap line names the address itself
    name = "ip-" + host.replace(".", "-").replace(":", "-") if _is_address(host) else host
    pid, tid = rng.randrange(1000, 99999), rng.randrange(1000, 99999)
    head = f"{name}:{pid}:{tid} [{rank % 8}] NCCL INFO "
    comm = f"0x{rng.randrange(0x55D000000000, 0x55DFFFFFFFFF):x}"
    buses = ("1b000", "43000", "52000", "61000", "9d000", "c3000", "d1000", "df000")
    bus, peer = buses[rank % 8], buses[(rank + 1) % 8]
    boot = [f"{head}Bootstrap : Using eth0:{host}<0>"] if _is_address(host) else []
    return [
        *boot,
        f"{head}Channel 00 : {rank}[{bus}] -> {(rank + 1) % nranks}[{peer}] via P2P/IPC",
        f"{head}Channel 01 : {rank}[{bus}] -> {(rank + 1) % nranks}[{peer}] via P2P/IPC",
        f"{head}Connected all rings",
        f"{head}comm {comm} rank {rank} nranks {nranks} cudaDev {rank % 8} busId {bus} "
        "- Init COMPLETE",
    ]


def _styled(style: Style, host: str, rank: int, world: int, rng: random.Random) -> list[str]:
    """Healthy lines of `host` in the culprit line's own style."""
    pre = _varied_delivery(style.pre, rng)
    if style.kind == "nccl":
        return [pre + ln for ln in _nccl_info(host, rank, world, rng)]
    if style.kind == "syslog":
        pid = rng.randrange(900, 40000)
        return [
            f"{pre}{style.post} {host} systemd-logind[{pid}]: New session "
            f"{rng.randrange(2, 9000)} of user slurm.",
            f"{pre}{style.post} {host} CRON[{pid + 3}]: (root) CMD (command -v debian-sa1 > "
            "/dev/null && debian-sa1 1 1)",
        ]
    if style.kind == "ompi":
        cores = "/".join("B" if c == rank % 4 else "." for c in range(4))
        return [
            f"{pre}{host}:{rng.randrange(1000, 99999):05d}] MCW rank {rank} bound to socket 0"
            f"[core {rank % 4}[hwt 0]]: [{cores}][./././.]"
        ]
    if style.kind == "kube_node_row":
        # the NAME column as wide as the culprit's cell, the STATUS cell as wide as its own
        post = re.sub(_NODE_STATES, lambda m: "Ready".ljust(len(m.group())), style.post, count=1)
        width = len(style.post) - len(style.post.lstrip()) + style.width
        post = " " * max(1, width - len(host)) + post.lstrip()
        return [pre + host + post]
    if style.kind == "sinfo_row":
        return [re.sub(rf"{_SINFO_STATES}(\s+)$", lambda m: "idle" + m.group(1), pre) + host]
    if style.kind == "ray":
        named = _RAY.search(pre)  # the culprit's actor's name, when the prefix gives one
        actor = (named.group("actor") or "").strip() if named else ""
        return [_ray_line(host, rng, actor or "RayTrainWorker")]
    # pdsh: a healthy task's training steps under its host's prefix
    return [f"{pre}{host}: {_train_step(rng)}" for _ in range(2)]


def _ray_line(ip: str, rng: random.Random, actor: str = "RayTrainWorker") -> str:
    return f"({actor} pid={rng.randrange(900, 90000)}, ip={ip}) {_train_step(rng)}"


# the tools a text shows, by the words their lines carry
_FAMILIES = (
    ("kube", r"kubectl|kubelet|^namespace:|\bpod\b"),
    ("ray", r"\bray\b|raylet"),
    ("slurm", r"\bsrun\b|slurm|sbatch|salloc"),
    ("torch", r"torch|elastic|c10d|childfailederror"),
)


def _family(text: str, culprit: str) -> str:
    low = text.lower()
    for name, words in _FAMILIES:
        if re.search(words, low, re.M) and (name != "ray" or _is_address(culprit)):
            return name
    return "nccl"


def _plain(
    family: str, host: str, rank: int, world: int, rng: random.Random, later: int, job: int
) -> list[str]:
    """Lines that name `host` as a healthy run of the tools the text shows does; `later` 0
    before the failure (the job's first step, its first rendezvous), 1 after it (the next)."""
    if family == "slurm":
        first = rank * 4
        return [
            f"srun: launching StepId={job}.{later} on host {host}, 4 tasks: [{first}-{first + 3}]"
        ]
    if family == "torch":
        return [
            "INFO:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node "
            f"'{host}_{rng.randrange(900, 99999)}_0' has joined round {later} of the rendezvous "
            f"'{job}' as rank {rank} in a world of size {world}."
        ]
    if family == "ray":
        return [_ray_line(host, rng)]
    return _nccl_info(host, rank, world, rng)[-2:]


def _pods_table(hosts: list[str], rng: random.Random) -> list[str]:
    """`kubectl get pods -o wide` with each other host's pod running (printers.go printPod)."""
    rows = [
        f"trainer-worker-{n + 1}-{rng.randrange(16**5):05x}".ljust(28)
        + f"1/1     Running   0          {rng.randrange(2, 40)}h   "
        + f"10.244.{n + 3}.{rng.randrange(2, 250)}".ljust(14)
        + host.ljust(max(12, len(host) + 3))
        + "<none>           <none>"
        for n, host in enumerate(hosts)
    ]
    head = (
        "NAME".ljust(28)
        + "READY   STATUS    RESTARTS   AGE   "
        + "IP".ljust(14)
        + "NODE".ljust(max(12, max(len(h) for h in hosts) + 3))
        + "NOMINATED NODE   READINESS GATES"
    )
    return ["$ kubectl get pods -o wide", head, *rows, ""]


def _culprit_lines(lines: list[str], culprit: str) -> list[tuple[int, re.Match[str]]]:
    pat = re.compile(token(culprit))
    return [(i, m) for i, ln in enumerate(lines) if (m := pat.search(ln))]


def with_neighbours(text: str, file: str, culprit: str, variant: int) -> str:
    """`text` with healthy lines of 1-3 other hosts around and between the culprit's lines."""
    rng = random.Random(zlib.crc32(f"{file}#{variant}".encode()))
    lines = text.splitlines()
    others = neighbours(culprit, text, 1 + variant + rng.randrange(2) * variant, rng)
    found = _culprit_lines(lines, culprit)
    style = next((s for i, m in found if (s := _style(lines[i], m))), None)
    if style is not None:
        inserts = _styled_inserts(lines, found, style, others, rng)
    elif (family := _family(text, culprit)) == "kube":
        inserts = {0: _pods_table(others, rng)}  # a status view pasted above the failure
    else:
        inserts = _plain_inserts(lines, family, others, rng)
    out: list[str] = []
    for i, line in enumerate([*lines, ""]):
        out.extend(inserts.get(i, []))
        if i < len(lines):
            out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _styled_inserts(
    lines: list[str],
    found: list[tuple[int, re.Match[str]]],
    style: Style,
    others: list[str],
    rng: random.Random,
) -> dict[int, list[str]]:
    rows = [i for i, m in found if (s := _style(lines[i], m)) and s.kind == style.kind]
    inserts: dict[int, list[str]] = {}
    world = len(others) + 1  # the culprit's rank 0 and one rank a neighbour
    if style.kind in ("kube_node_row", "sinfo_row"):
        # a table lists each node once, sorted by name: above the culprit's row or below it
        culprit = found[0][1].group().lower()
        for n, host in enumerate(others):
            at = rows[0] if host.lower() < culprit else rows[0] + 1
            inserts.setdefault(at, []).extend(_styled(style, host, n + 1, world, rng))
        return inserts
    # before the first of the culprit's styled lines, after the last, and between two; Open
    # MPI's bindings are reported at launch, before any of the job's own lines
    gaps = sorted({rows[0], rows[-1] + 1} | ({rng.choice(rows[1:])} if len(rows) > 1 else set()))
    gaps = gaps[:1] if style.kind == "ompi" else gaps
    for n, host in enumerate(others):
        for g in gaps if len(others) == 1 else {gaps[n % len(gaps)], gaps[-1 - n % len(gaps)]}:
            inserts.setdefault(g, []).extend(_styled(style, host, n + 1, world, rng))
    return inserts


def _plain_inserts(
    lines: list[str], family: str, others: list[str], rng: random.Random
) -> dict[int, list[str]]:
    # a job's processes write one stream: their lines come between the failing ones where a
    # paragraph starts (after a blank line), never inside one message (a traceback, a banner,
    # an exception's text over several lines, a terminal's cut of one line)
    banner = _in_banner(lines)
    paragraphs = [
        i
        for i in range(1, len(lines))
        if not lines[i - 1].strip() and lines[i][:1].strip() and not banner[i]
    ]
    gaps = sorted({0, len(lines)} | ({rng.choice(paragraphs)} if paragraphs else set()))
    pre, job = _stream_prefix(lines), rng.randrange(1000, 900000)
    world = len(others) + 1  # the culprit's rank 0 and one rank a neighbour
    inserts: dict[int, list[str]] = {}
    for n, host in enumerate(others):
        for g in gaps if len(others) == 1 else {gaps[n % len(gaps)], gaps[-1]}:
            made = _plain(family, host, n + 1, world, rng, int(g > 0), job)
            inserts.setdefault(g, []).extend(pre + ln for ln in made)
    return inserts


# a banner's rule: Open MPI's show_help messages between dashes, MPICH Hydra's between "="
_RULE = re.compile(r"^\s*(?:-{20,}|={20,})\s*$")


def _in_banner(lines: list[str]) -> list[bool]:
    """For each line, whether it is inside a banner (between two rules): one message."""
    out, inside = [], False
    for line in lines:
        if _RULE.match(line):
            inside = not inside
        out.append(inside)
    return out


# kubelet's RFC3339Nano timestamp in front of every line of `kubectl logs --timestamps`
_STREAM_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")


def _stream_prefix(lines: list[str]) -> str:
    """The delivery prefix every line of the text has (a `kubectl logs --timestamps` stamp)."""
    stamps = [m.group() for ln in lines if ln.strip() if (m := _STREAM_TS.match(ln))]
    return stamps[-1] if stamps and len(stamps) == sum(1 for ln in lines if ln.strip()) else ""
