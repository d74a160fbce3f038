"""More multi-host compositions for culprit_compose.py: more ways a culprit shows, more
deliveries, and the other noise its victims print (their launchers' teardown, their own
torchrun summaries, lines they wrote before the fault).

Formats (made-up values, real shapes):
- Xid 63/64/94 texts: NVIDIA/open-gpu-kernel-modules ras_events.c's
  ECC_ROW_REMAP_PENDING_CTRL_CALL_XID_MESSAGE_FMT "Row Remapper: New row marked for remapping,
  reset gpu to activate." and ECC_ROW_REMAPPING_FAILURE_TABLE_FULL_XID_MESSAGE_FMT "Row Remapper
  Error: (0x%016llx) - Row Remapping table is full" (Xid 63 / 64 by their NV_ERROR_LOG codes
  INFOROM_DRAM_RETIREMENT_EVENT / _FAILURE), and Xid 94's "Contained: %s (0x%x). RST: %s, D-RST:
  %s" as the Xid catalog (docs.nvidia.com/deploy/xid-errors) quotes it;
- `nvidia-smi -q -d ECC` through pdsh: the layout of test_rules_emitter_formats_smi.py (a real
  H100's, driver 580.159.04), volatile "DRAM Uncorrectable" non-zero;
- NCCL's "%s: connect to %s returned %s, exceeded error retry count after %d attempts"
  (NVIDIA/nccl src/os/linux.cc@5067397c2676d5aed50042fc39e5c8ee96eb0027 socketConnectCheck,
  the peer numeric) and "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId
  0x%llx - Init COMPLETE" (src/init.cc, same commit);
- c10d's "[c10d] recvValue failed on SocketImpl(fd=%d, addr=%s, remote=%s): %s"
  (pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp@b874478480, as
  test_rules_emitter_formats_torch.py quotes it);
- srun's "Node failure on %s" (SchedMD/slurm src/api/step_launch.c@284c3b95f08a2dc2478499837b0
  3355e1b9c5c75) with a surviving node's slurmstepd "*** %s ON %s CANCELLED AT %s DUE TO NODE
  FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***" (src/slurmd/slurmstepd/req.c, same commit: the
  "ON %s" is the printing stepd's own node), and slurmctld's "Killing %pJ on failed node %s"
  (src/slurmctld/job_mgr.c@3737815dcee2ba97cdaa2e48aee0518ac4fafa6b);
- torch elastic: agent/server/api.py's "Received %s death signal, shutting down workers",
  multiprocessing/api.py's SignalException "Process %d got signal: %d" and the ChildFailedError
  table (errors/__init__.py _FAILURE_FORMAT_TEMPLATE), as test_rules_emitter_formats_elastic.py
  quotes them;
- deliveries: PMIx's detailed output tag "[%s,%s][%s:%s]<%s>: " (jobid, rank, hostname, pid,
  stream; `mpirun --output tag-detailed` of Open MPI 5: openpmix/openpmix src/common/pmix_iof.c
  @494e9d9d03659ac99a4520492d26b8c33d67d9d4) and `kubectl logs --prefix --timestamps` (the
  kubelet's RFC 3339 nano stamp behind kubectl's "[pod/NAME/CONTAINER] ").
"""

from __future__ import annotations

import random

from tests.correlator.culprit_compose import (
    _ELASTIC,
    _POD_NAME,
    _SIGTERM,
    _WD,
    _XID,
    DELIVERY,
    FAULTS,
    VICTIM_LINES,
    Composition,
    Fault,
    _hosts,
)

# Deliveries that name the host on each line of a program's output
MORE_DELIVERY: dict[str, str] = {
    **DELIVERY,
    "pmix_tag_detailed": "[1,{r}][{h}:4{r}21]<stderr>: ",
    "kubectl_prefix_ts": "[pod/{h}/pytorch] 2025-03-01T10:10:{s:02d}.123456789Z ",
}
_KUBE = ("kubectl_prefix", "kubectl_prefix_ts")


def smi_ecc(host: str) -> str:
    """`pdsh -w host nvidia-smi -q -d ECC`: a volatile uncorrectable DRAM count on one GPU."""
    keys = ("SRAM Correctable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED")
    keys += ("DRAM Correctable", "DRAM Uncorrectable")
    rows = ["==============NVSMI LOG==============", f"{'Timestamp':<55}: Sat Mar  1 10:20:00 2025"]
    rows += [f"{'Driver Version':<55}: 580.159.04", "GPU 00000000:3B:00.0", "    ECC Errors"]
    for block, counts in (("Volatile", (0, 0, 0, 3, 2)), ("Aggregate", (0, 0, 0, 3, 2))):
        rows.append(f"        {block}")
        rows += [f"{'            ' + k:<55}: {n}" for k, n in zip(keys, counts, strict=True)]
    return "\n".join(f"{host}: {row}" for row in rows)


MORE_FAULTS: dict[str, Fault] = {
    "xid63": Fault(_XID.format(c="{c}", xid=63) + "Row Remapper: New row marked for remapping, "
                   "reset gpu to activate.", "", ("gpu_hardware", "node")),
    "xid64": Fault(_XID.format(c="{c}", xid=64) + "Row Remapper Error: (0x00000000018f31d8) - "
                   "Row Remapping table is full", "", ("gpu_hardware", "node")),
    "xid94": Fault(_XID.format(c="{c}", xid=94) + "Contained: SM (0x1). RST: No, D-RST: No", "",
                   ("gpu_hardware", "node")),
    "smi_ecc": Fault("{smi}", "", ("gpu_hardware", "node")),
    # NCCL prints a connect's peer numeric: the culprit owns it by its own NCCL init line
    "nccl_connect_refused": Fault(
        "{c}:2311:2311 [0] NCCL INFO NET/Socket : Using [0]eth0:{ip}<0>",
        "{v}:2311:2390 [0] NCCL WARN ncclOsSocketPollConnect: connect to {ip}<45678> returned "
        "Connection refused, exceeded error retry count after 35 attempts",
        ("interconnect", "unknown")),
    # the TCPStore's server (rank 0's host) went away under its clients
    "store_recv_reset": Fault("", "{q}[W301 10:00:06.123456789 TCPStore.cpp:125] [c10d] recvValue"
                              " failed on SocketImpl(fd=73, addr=[{v}]:51546, remote=[{c}]:29500)"
                              ": Connection reset by peer", ("interconnect", "unknown")),
    # srun names the failed node; a surviving node's stepd cancels the step naming itself
    "srun_node_failure": Fault(
        "srun: error: Node failure on {c}\nsrun: Job step aborted: Waiting up to 62 seconds for "
        "job step to finish.\nslurmstepd: error: *** STEP 1943824.0 ON {v0} CANCELLED AT "
        "2025-03-01T10:00:07 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", "",
        ("node", "node")),
    "slurmctld_killing": Fault("[2025-03-01T10:00:06.123] Killing JobId=55 on failed node {c}", "",
                               ("node", "node")),
}  # fmt: skip

ALL_FAULTS: dict[str, Fault] = {**FAULTS, **MORE_FAULTS}

# Lines a victim wrote before the fault (NCCL's init), stamped before it
_EARLY = "{h}:2311:2311 [0] NCCL INFO comm 0x8a0b0c0 rank {r} nranks 8 cudaDev 0 nvmlDev 0 " \
    "busId 1b000 commId 0x5e1f2a3b4c5d6e7f - Init COMPLETE"  # fmt: skip
# What a victim's launcher prints after its ranks timed out: its own teardown
_TEARDOWN: tuple[str, ...] = (
    _SIGTERM,
    "I0301 10:10:{s:02d}.500000 140 torch/distributed/elastic/agent/server/api.py:717] Received "
    "Signals.SIGTERM death signal, shutting down workers",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4{r}21 got signal: 15",
)
# A victim's own torchrun summary: its rank ended by the watchdog's abort (SIGABRT) or the
# launcher's SIGTERM, the table naming the victim's own host
_OWN_END = (("-6", "Signal 6 (SIGABRT)"), ("-15", "Signal 15 (SIGTERM)"))


def _deliveries(hosts: list[str]) -> list[str]:
    pods = all(_POD_NAME.fullmatch(h) for h in hosts)
    return [d for d in sorted(MORE_DELIVERY) if pods or d not in _KUBE]


def _victim_block(v: str, i: int, delivery: str, body: str, rng: random.Random) -> list[str]:
    """One victim's lines: maybe its init line, its timeout, maybe its launcher's teardown and
    its own torchrun summary."""
    pre = delivery.format(h=v, r=i + 1, s=10 + i)
    out = [(pre + body).format(h=v, r=i + 1, s=10 + i)]
    if rng.random() < 0.4:
        out.append(pre + rng.choice(_TEARDOWN).format(r=i + 1, s=12 + i))
    if rng.random() < 0.3:
        code, sig = rng.choice(_OWN_END)
        summary = _ELASTIC.format(code=code, sig=sig).replace("10:00:05", f"10:10:{20 + i:02d}")
        out += [pre + line for line in summary.format(p="", c=v).split("\n")]
    return out


def compose_more(fault: str, convention: str, victims: int, where: str, seed: int) -> Composition:
    """One culprit showing `fault` (of ALL_FAULTS) among `victims` hosts that time out, through
    any of MORE_DELIVERY, with the victims' early lines and teardown mixed in."""
    rng = random.Random(seed)
    f = ALL_FAULTS[fault]
    hosts = _hosts(convention, max(victims, f.min_victims) + 1, rng)
    culprit = hosts.pop(rng.randrange(len(hosts)))
    delivery = MORE_DELIVERY[rng.choice(_deliveries([*hosts, culprit]))]
    body = VICTIM_LINES[rng.choice(sorted(VICTIM_LINES))]
    early = [_EARLY.format(h=v, r=i + 1) for i, v in enumerate(hosts) if rng.random() < 0.3]
    blocks = [_victim_block(v, i, delivery, body, rng) for i, v in enumerate(hosts)]
    lines = [ln for block in blocks for ln in block]
    ends = [sum(len(b) for b in blocks[: k + 1]) for k in range(len(blocks))]
    ip = f"10.{rng.randrange(1, 250)}.{rng.randrange(1, 250)}.{rng.randrange(2, 250)}"
    p = delivery.format(h=culprit, r=9, s=5)
    subs = {"c": culprit, "ip": ip, "p": p, "v0": hosts[0], "smi": smi_ecc(culprit)}
    own = f.own.format(**subs).split("\n") if f.own else []
    about = [
        f.about.format(v=v, c=culprit, ip=ip, q=delivery.format(h=v, r=i + 1, s=6))
        for i, v in enumerate(hosts)
        if f.about
    ]
    # another host's lines may fall inside a victim's torchrun table (pdsh, kubectl and Open
    # MPI interleave hosts' lines), a victim's own only between its writes
    cut = {"first": 0, "middle": len(lines) // 2, "last": len(lines)}[where]
    end = next((e for e in ends if e >= cut), len(lines)) if about else cut
    ordered = early + lines[:cut] + own + lines[cut:end] + about + lines[end:]
    return Composition("\n".join(ordered) + "\n", f.want, culprit)


def timeouts_and_teardown(convention: str, victims: int, seed: int) -> Composition:
    """Only hosts that waited, each with its launcher's teardown and its own torchrun summary
    (the watchdog's abort or the launcher's SIGTERM): still no cause and no culprit."""
    rng = random.Random(seed)
    hosts = _hosts(convention, victims, rng)
    delivery = MORE_DELIVERY[rng.choice(_deliveries(hosts))]
    lines = []
    for i, v in enumerate(hosts):
        pre = delivery.format(h=v, r=i + 1, s=10 + i)
        lines.append((pre + _WD).format(r=i + 1, s=10 + i))
        lines.append(pre + rng.choice(_TEARDOWN).format(r=i + 1, s=12 + i))
        code, sig = _OWN_END[i % 2]
        lines += [
            pre + ln for ln in _ELASTIC.format(code=code, sig=sig).format(p="", c=v).split("\n")
        ]
    return Composition("\n".join(lines) + "\n", ("nccl_timeout_unknown", "unknown"), None)
