"""Multi-host logs composed from real emitter lines: one host at fault, the others waiting for it.

Each composition puts one culprit's fault line (or the lines other hosts print about it) among
the timeouts of 1 to 7 victim hosts, with the hosts named by one of host_rename's conventions,
each host's program lines delivered through a real prefix (pdsh's "host: ", journald's syslog
head, kubectl's "[pod/NAME/CONTAINER] "), and the culprit's lines first, in the middle or last
in the text. The rule of issue #11: the
culprit is the host whose own line shows the fault or the peer the others name, never a host
that only printed a timeout; with only timeouts there is no culprit.

Formats (made-up values, real shapes; each family's rule cites the same sources):
- the kernel's Xid line, NVRM's "Xid (PCI:%s): %d, pid=%d, name=%s, %s" (the Xid catalog,
  docs.nvidia.com/deploy/xid-errors), and the OOM killer's "Out of memory: Killed process"
  (torvalds/linux mm/oom_kill.c __oom_kill_process), behind rsyslog's "Mon DD HH:MM:SS host
  kernel: " head;
- slurmctld's "error: Nodes %s not responding, setting DOWN" (SchedMD/slurm src/slurmctld/
  ping_nodes.c);
- NCCL's "NET/IB : Got completion from peer %s with status=%d ..." (src/transport/net_ib.cc)
  and "socketProgress: Connection closed by remote peer %s" (src/misc/socket.cc), behind NCCL's
  "host:pid:tid [dev] " prefix;
- Gloo's "Connection closed by peer [%s]:%d" (gloo/transport/tcp/pair.cc) and "Timed out
  waiting %dms for recv operation to complete" (gloo/transport/tcp/unbound_buffer.cc) as torch
  raises them;
- c10d's "The client socket has failed to connect to [%s]:%d (errno: %d - %s)." (torch/csrc/
  distributed/c10d/socket.cpp);
- ProcessGroupNCCL's watchdog "Watchdog caught collective operation timeout: WorkNCCL(...) ran
  for %d milliseconds before timing out." (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp) and
  torch elastic's "Sending process %s closing signal %s" (torch/distributed/elastic/
  multiprocessing/api.py).
The cited sources are those quoted in emitter_probe.py and the rule families (same commits).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from tests.correlator.host_rename import CONVENTIONS

_WD = (
    "[rank{r}]:[E301 10:10:{s:02d}.123456789 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=100, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600008 milliseconds before timing out."
)
# How a host's program lines reach the log: pdsh's "host: " (pdsh/src/pdsh/dsh.c), journald's
# syslog head for the program, or `kubectl logs --prefix` (h: the host, r: a rank, s: seconds).
# kubectl's prefix is read as the line's host (collector/parse/delivery.py KUBE_PREFIX); a pod's
# name is a DNS-1123 subdomain, so it delivers only hosts named so.
DELIVERY: dict[str, str] = {
    "pdsh": "{h}: ",
    "journald": "Mar  1 10:10:{s:02d} {h} python[4{r}21]: ",
    "kubectl_prefix": "[pod/{h}/pytorch] ",
}
# What a victim host's program prints while it waits for the culprit
VICTIM_LINES: dict[str, str] = {
    "watchdog": _WD,
    "gloo_timeout": (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
        "waiting 1800000ms for recv operation to complete"
    ),
}
# Noise a victim may add: the launcher tearing its own ranks down (no fault of its own)
_SIGTERM = (
    "W0301 10:10:{s:02d}.123000 140 torch/distributed/elastic/multiprocessing/api.py:897] "
    "Sending process 4{r}21 closing signal SIGTERM"
)
_ELASTIC = (
    "\n".join(
        "{p}" + line
        for line in (
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
            "=" * 60,
            "train.py FAILED",
            "-" * 60,
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "-" * 60,
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2025-03-01_10:00:05",
            "  host      : {c}",
            "  rank      : 3 (local_rank: 3)",
            "  exitcode  : {code} (pid: 14750)",
            "  error_file: <N/A>",
            "  traceback : {sig} received by PID 14750",
            "=" * 60,
        )
    )
    .replace("{p}", "{{p}}")
    .replace("{c}", "{{c}}")
)
_XID = "Mar  1 10:00:05 {c} kernel: NVRM: Xid (PCI:0000:3b:00): {xid}, pid=1234, name=python, "


@dataclass(frozen=True)
class Fault:
    """One way the culprit shows: its own lines (c: the culprit, ip: its address, p: the
    delivery prefix of its program's lines), or lines that its victims (v; q: the
    delivery prefix of their programs' lines) print naming it; the
    verdict its family documents."""

    own: str  # the culprit's own line(s), "" when only its victims speak of it
    about: str  # a line each victim prints about the culprit, "" when none
    want: tuple[str, str]  # (category, blame)
    min_victims: int = 1  # victims needed before `about` settles it (several name one peer)


FAULTS: dict[str, Fault] = {
    "xid79": Fault(_XID.format(c="{c}", xid=79) + "GPU has fallen off the bus.", "",
                   ("gpu_hardware", "node")),
    "xid48": Fault(_XID.format(c="{c}", xid=48) + "An uncorrectable double bit error (DBE) has "
                   "been detected on GPU in the framebuffer at partition 1, subpartition 0.", "",
                   ("gpu_hardware", "node")),
    "xid95": Fault(_XID.format(c="{c}", xid=95) + "Uncontained: FBHUB. RST: No, D-RST: No", "",
                   ("gpu_hardware", "node")),
    "xid74": Fault(_XID.format(c="{c}", xid=74) + "NVLink: fatal error detected on link 4(0x10000"
                   ", 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)", "", ("interconnect", "node")),
    "host_oom": Fault(
        "Mar  1 10:00:05 {c} kernel: Out of memory: Killed process 1234 (python) total-vm:"
        "123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:"
        "200000kB oom_score_adj:0", "", ("oom_host", "job")),
    "node_down": Fault("[2025-03-01T10:00:05.123] error: Nodes {c} not responding, setting DOWN",
                       "", ("node", "node")),
    "nccl_closed": Fault("", "{v}:2311:2390 [0] misc/socket.cc:58 NCCL WARN socketProgress: "
                         "Connection closed by remote peer {c}<40213>",
                         ("interconnect", "unknown")),
    "gloo_closed": Fault("", "{q}RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
                         "pair.cc:598] Connection closed by peer [{c}]:8594",
                         ("interconnect", "unknown")),
    "store_refused": Fault("", "{q}[W301 10:00:05.123456789 socket.cpp:752] [c10d] The client "
                           "socket has failed to connect to [{c}]:29500 (errno: 111 - Connection "
                           "refused).", ("interconnect", "unknown")),
    "ib_peer": Fault("", "{v}:2311:2390 [1] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got "
                     "completion from peer {c}<42145> with status=12 opcode=0 len=0 vendor err 129"
                     " (Recv) localGid ::ffff:10.1.0.5 remoteGids::ffff:10.1.0.9 hca mlx5_0",
                     ("interconnect", "infra"), min_victims=2),
    "illegal_address": Fault("{p}[rank3]: RuntimeError: CUDA error: an illegal memory access "
                             "was encountered", "", ("user_code", "job")),
    # the GPU falls off the bus: its own rank's CUDA error and its peers' lost connections follow
    "xid79_and_fallout": Fault(
        _XID.format(c="{c}", xid=79) + "GPU has fallen off the bus.\n{p}[rank3]: RuntimeError: "
        "CUDA error: unspecified launch failure", "{v}:2311:2390 [0] misc/socket.cc:58 NCCL WARN "
        "socketProgress: Connection closed by remote peer {c}<40213>", ("gpu_hardware", "node")),
    # a peer named by address, owned by the host whose NCCL init line shows that interface
    "gloo_closed_by_address": Fault(
        "{c}:2311:2311 [0] NCCL INFO NET/Socket : Using [0]eth0:{ip}<0>",
        "{q}RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
        "closed by peer [{ip}]:8594", ("interconnect", "unknown")),
    "xid31": Fault(_XID.format(c="{c}", xid=31) + "Ch 00000008, intr 00000000. MMU Fault: ENGINE "
                   "GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f00_00000000. Fault is of type "
                   "FAULT_PDE ACCESS_TYPE_VIRT_READ", "", ("user_code", "job")),
    "nccl_recv_reset": Fault("", "{v}:2311:2390 [0] misc/socket.cc:538 NCCL WARN "
                             "socketProgressOpt: Call to recv from {c}<36219> failed : "
                             "Connection reset by peer", ("interconnect", "unknown")),
    # the culprit's own ranks time out too once its GPU is gone: it is still the culprit
    "xid79_and_own_timeout": Fault(
        _XID.format(c="{c}", xid=79) + "GPU has fallen off the bus.\n{p}" + _WD.format(r=9, s=20),
        "",
        ("gpu_hardware", "node")),
    # torchrun's summary on the culprit's own agent: its rank was SIGKILLed (the signal reasoner)
    "elastic_sigkill": Fault(_ELASTIC.format(code=-9, sig="Signal 9 (SIGKILL)"), "",
                             ("oom_host", "unknown")),
}  # fmt: skip


@dataclass(frozen=True)
class Composition:
    """A composed log and what explain must read from it."""

    text: str
    want: tuple[str, str]
    culprit: str | None


# Each convention's node names, and the plain on-premise "gpu-node-07"
NAMERS: dict[str, Callable[[int], str]] = {
    "plain": lambda n: f"gpu-node-{n:02d}",
    **{name: conv.short for name, conv in CONVENTIONS.items()},
}


def _hosts(convention: str, n: int, rng: random.Random) -> list[str]:
    short = NAMERS[convention]
    start = rng.randrange(1, 60)
    return [short(start + i) for i in range(n)]


_POD_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def _victim_lines(victims: list[str], rng: random.Random) -> tuple[list[str], str]:
    """Each victim's timeout (one body, one delivery for the whole log), and that delivery."""
    body = VICTIM_LINES[rng.choice(sorted(VICTIM_LINES))]
    pods = all(_POD_NAME.fullmatch(v) for v in victims)
    delivery = DELIVERY[rng.choice([d for d in sorted(DELIVERY) if pods or d != "kubectl_prefix"])]
    out = []
    for i, v in enumerate(victims):
        out.append((delivery + body).format(h=v, r=i + 1, s=10 + i))
        if rng.random() < 0.3:
            out.append((delivery + _SIGTERM).format(h=v, r=i + 1, s=12 + i))
    return out, delivery


def compose(fault: str, convention: str, victims: int, where: str, seed: int) -> Composition:
    """One culprit showing `fault` among `victims` hosts that time out; the culprit's lines at
    `where` ("first", "middle", "last") in the text."""
    rng = random.Random(seed)
    f = FAULTS[fault]
    victims = max(victims, f.min_victims)
    hosts = _hosts(convention, victims + 1, rng)
    culprit = hosts.pop(rng.randrange(len(hosts)))
    lines, delivery = _victim_lines(hosts, rng)
    ip = f"10.{rng.randrange(1, 250)}.{rng.randrange(1, 250)}.{rng.randrange(2, 250)}"
    p = delivery.format(h=culprit, r=9, s=5)  # the culprit's program lines come the same way
    own = f.own.format(c=culprit, ip=ip, p=p).split("\n") if f.own else []
    about = [
        f.about.format(v=v, c=culprit, ip=ip, q=delivery.format(h=v, r=i + 1, s=6))
        for i, v in enumerate(hosts)
        if f.about
    ]
    cut = {"first": 0, "middle": len(lines) // 2, "last": len(lines)}[where]
    ordered = lines[:cut] + own + about + lines[cut:]
    return Composition("\n".join(ordered) + "\n", f.want, culprit)


def timeouts_only(convention: str, victims: int, seed: int) -> Composition:
    """Only hosts that waited: a timeout with no other cause and no culprit."""
    rng = random.Random(seed)
    lines, _ = _victim_lines(_hosts(convention, victims, rng), rng)
    return Composition("\n".join(lines) + "\n", ("nccl_timeout_unknown", "unknown"), None)


_BENIGN: tuple[Callable[[str], str], ...] = (
    lambda c: f"{c}:2311:2390 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0",
    lambda c: f"Mar  1 10:00:05 {c} kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module",
    lambda c: f"{c}: I0301 10:00:05.000000 140 torch/distributed/run.py:812] Using nproc_per_node",
)


def benign_beside_timeouts(convention: str, victims: int, seed: int) -> Composition:
    """A bystander's informational line among the timeouts: still no cause and no culprit."""
    rng = random.Random(seed)
    hosts = _hosts(convention, victims + 1, rng)
    bystander = hosts.pop()
    lines, _ = _victim_lines(hosts, rng)
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(_BENIGN)(bystander))
    return Composition("\n".join(lines) + "\n", ("nccl_timeout_unknown", "unknown"), None)
