"""A peer's own fault behind the InfiniBand errors that the hosts talking to it printed.

When a rank's process dies (a crash signal, a CUDA error, its GPU, an OOM kill) its queue pairs
go with it, and every host still sending to it gets no acknowledgement: after its transport
retries it polls IBV_WC_RETRY_EXC_ERR (12), or IBV_WC_RNR_RETRY_EXC_ERR (13) when the peer
stopped posting receives, for the work requests to that peer. Sources:
- rdma-core libibverbs/verbs.c ibv_wc_status_str ("transport retry counter exceeded", "RNR
  retry counter exceeded"); the Marvell FastLinQ user guide's RDMA error counters (AH0054602-00,
  table 7-3): requester retry exceeded and RNR retries exceeded mean "the remote peer may have
  stopped responding, or a network issue is preventing messages acknowledgment".
- NVIDIA/nccl src/transport/net_ib.cc: WARN "NET/IB : Got completion from peer %s with error
  %d" (later "with status=%d", then "status=%s(%d)") returns ncclRemoteError, which the NCCL
  docs (user-guide/docs/api/types.html) define as "A call failed possibly due to a network error
  or a remote process exiting prematurely"; printIbWcStatusHint reads IBV_WC_RETRY_EXC_ERR as a
  timeout (NCCL_IB_TIMEOUT).
- openucx/ucx @9466d104a3: src/uct/ib/mlx5/ib_mlx5_log.c uct_ib_mlx5_completion_with_err reads
  the syndromes "Transport retry count exceeded", "Receive-no-ready retry count exceeded" and
  "Remote side aborted" as UCS_ERR_ENDPOINT_TIMEOUT (src/ucs/type/status.c: "Endpoint
  timeout") and names the peer only by its QP and LID/GID ("[rqpn 0x%x dlid=%d ...]",
  ib_log.c uct_ib_log_dump_qp_peer_info); rc_verbs_iface.c logs "send completion with error:
  %s" of ibv_wc_status_str and the same LID dump; ucp_ep.c logs "ep %p: error '%s' on %s will
  not be handled since no error callback is installed" with the transport and device only;
  ud_ep.c's "UD endpoint %p to %s:%d: unhandled timeout error" names the peer's hostname
  (ucs_get_host_name) in a build with debug data, "<no debug data>" otherwise.
So a victim's line alone cannot tell a dead peer from the fabric (today's interconnect verdict,
kept), but when the peer it names shows its own fault in the same window, the fault is the
cause and that peer the culprit; a host that merely printed the loss never is (issue #11).
UCX's endpoint timeouts that name no host (a LID names none the text can place) are read the
same way when exactly one host other than the printers shows its own fault in the window: the
timeout says the remote end stopped answering, and that host is the only one the text shows
ending; with none, or several, nothing changes.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from correlator.explain.readers_ucx import PEER_KEY
from correlator.rules import KIND_DEFAULTS, PATTERNS
from correlator.rules.emitters import EMITTER_FALLBACKS
from correlator.rules.hosts import RANK_PEER
from correlator.rules.signals import SELF_CRASH
from correlator.rules.xid import USER_FAULT_XIDS, xid_info, xid_verdict
from correlator.taxonomy import Blame, Category, Verdict
from timeline.models import EventKind

if TYPE_CHECKING:
    from correlator.explain.reasoning import Finding

# The work-completion errors of the emitters (rules/emitters/ib_verbs.json, nccl.json): Open MPI
# openib's handle_wc, MVAPICH2's handle_cqe, NCCL net_ib's "Got completion from peer", and the
# verbs status texts UCX and others print.
_VICTIM_RULES = {
    "ib_wc_error",
    "mvapich2_handle_cqe_wc_error_peer_rank",
    "mvapich2_handle_cqe_wc_error",
    "openib_error_polling_cq",
    "nccl_ib_completion_from_peer",
    "ucx_ud_ep_unhandled_timeout",
    "ucx_transport_gave_up",
}
_VICTIM_SUMMARIES = frozenset(r.summary for r in PATTERNS if r.name in _VICTIM_RULES)

# The statuses that say the remote end stopped answering (12, 13) as each emitter prints them:
# the verbs texts, openib's "RETRY EXCEEDED ERROR status number 12", MVAPICH2's "wc.status=12"
# and "Got completion with error 12", NCCL's "with error 12," / "status=12" /
# "status=IBV_WC_RETRY_EXC_ERR(12)". A flush (5) or a local error points at no peer.
_PEER_LOST = re.compile(
    r"retry count(?:er)? exceeded|RETRY_EXC_ERR|RETRY EXCEEDED ERROR|unhandled timeout error"
    r"|(?:status number |wc\.status=|status=|with error )1[23]\b",
    re.IGNORECASE,
)

# UCX's own lines (src/ucs/debug/log.c: "... UCX  ERROR <message>" behind "[time] [host:pid:thread]
# file:line"; ud_ep.c's ucs_fatal "Fatal: UD endpoint ...") and, of them, the statuses UCX maps to
# UCS_ERR_ENDPOINT_TIMEOUT (ib_mlx5_log.c's three syndromes; ibv_wc_status_str's retry texts that
# rc_verbs prints; the status string itself; UD's unhandled timeout): the remote end stopped
# answering. A local error, a flush or a reset by the peer is none of them.
_UCX_LINE = re.compile(r"\bUCX\s+(?:ERROR|WARN|DIAG)\b|\bFatal: UD endpoint 0x")
_UCX_TIMEOUT = re.compile(
    r"retry count(?:er)? exceeded|Remote side aborted|Endpoint timeout|unhandled timeout error",
    re.IGNORECASE,
)

# A process's own end: a CUDA error of the program (the cuda family, the CUDA error kind), a
# crash the kernel or the program's handler reports (segfault). A crash signal, an OOM kill or
# a GPU fault that drains the node are read from the verdict itself (_fault).
_CRASH_RULES = {
    "segfault",
    "kernel_process_crash",
    "illegal_access",
    "device_assert",
    "launch_failure",
}
# An application's own fault on its GPU that the driver reports: the Xids of NVIDIA's catalog
# (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) whose immediate action
# is RESTART_APP (13 Graphics Engine Exception, 31 GPU memory page fault): the process's CUDA
# context cannot go on, as after the CUDA error it gets. Xid 43 (IGNORE) is the channel reset
# after it, no end of its own.
_APP_XIDS = frozenset(
    xid_verdict(code).summary
    for code in USER_FAULT_XIDS
    if (info := xid_info(code)) and info.immediate_action == "RESTART_APP"
)
_FAULT_SUMMARIES = (
    frozenset(
        r.summary
        for r in PATTERNS
        if r.category is Category.USER_CODE
        and (r.name in _CRASH_RULES or (r.family == "cuda" and r.root_cause))
    )
    | {KIND_DEFAULTS[EventKind.CUDA_ERROR].summary}
    | _APP_XIDS
)

# How far a peer's fault may be from the first loss of it, by the text's own clocks: the loss
# comes after the death, by the transport's retries (NCCL_IB_TIMEOUT 20 is about 30 s in all; a
# larger timeout minutes); a fault printed later than the hosts' clock skew is no cause of it.
BEFORE_S = 600.0
AFTER_S = 10.0


def fault_behind_transport(
    best: Finding, found: list[Finding], addresses: dict[str, str]
) -> tuple[Finding, list[Finding]]:
    """When the strongest sign is InfiniBand completions that lost a named peer, and that one
    peer's own lines show a process fault in the same window, the fault (raised to the errors'
    strength) and the findings with it; when several named peers show one, the errors with no
    printer blamed; else `best` and `found` unchanged. `addresses` maps an address or a rank
    marker to the host the text shows it on."""
    v = best.verdict
    if v.category is not Category.INTERCONNECT or not (v.root_cause or _ucx_timeout(best)):
        return best, found
    support = [f for f in found if same_kind(f.verdict, v)]
    if not all(f.verdict.summary in _VICTIM_SUMMARIES for f in support):
        return best, found  # a fault of a host's own HCA or link is shown beside them
    printers = {f.event.node.lower() for f in support if f.event.node}
    if any(_own_link_fault(f, printers) for f in found):
        return best, found  # a weaker one (a link down) on a printer explains its losses too
    lost = [
        (p, f)
        for f in support
        if _PEER_LOST.search(f.event.raw or "")
        if (p := _peer(f, addresses))
    ]
    linked: dict[str, list[Finding]] = {}
    for peer in {p.lower() for p, _ in lost} - printers:  # a printer lost peers itself
        losses = [f for p, f in lost if p.lower() == peer]
        faults = [g for g in found if _fault(g.verdict) and _on(g, peer) and _near(g, losses)]
        if faults:
            linked[peer] = faults
    if not lost and support and all(_ucx_timeout(f) for f in support):
        linked = _one_faulted_host(found, support, printers)
    if len(linked) > 1:  # several peers faulted: no single culprit, and no printer is one
        quiet = [replace(f, verdict=_unblamed(f.verdict)) if f in support else f for f in found]
        return replace(best, verdict=_unblamed(v)), quiet
    if not linked:
        return best, found
    faults = next(iter(linked.values()))
    fault = max(faults, key=lambda g: (g.verdict.root_cause, g.verdict.priority))
    shown = {id(g) for g in faults if g.verdict.category is fault.verdict.category}
    raised = [_raised(g, v.priority) if id(g) in shown else g for g in found]
    return _raised(fault, v.priority), raised


def same_kind(a: Verdict, b: Verdict) -> bool:
    """Whether `a` supports `b` (reasoning.conclude's support, and the losses here): the same
    kind of failure and about as strong a sign."""
    return (a.category, a.blame) == (b.category, b.blame) and a.priority >= b.priority - 10


def _ucx_timeout(f: Finding) -> bool:
    """Whether the finding is UCX's own line of an endpoint that timed out (the peer's end)."""
    return _ucx_timeout_line(f.event.raw or "")


def _ucx_timeout_line(raw: str) -> bool:
    return bool(_UCX_LINE.search(raw) and _UCX_TIMEOUT.search(raw))


# What a printer loses is a collective or a connection; a CUDA call's failure that no rule
# blames its printer for (NCCL's "%s:%d -> 1" return-code trace, src/include/checks.h) is still
# its own process's
_LOSS_KINDS = frozenset({Category.INTERCONNECT, Category.NCCL_TIMEOUT_UNKNOWN})
# A catch-all's reading (a family's fallback rule, NCCL's bare WARN) does not know what the
# line reports, so it shows no loss: a cut "NCCL WARN Cuda failure" is its printer's own
_UNSPECIFIC = frozenset(
    {r.summary for r in EMITTER_FALLBACKS} | {KIND_DEFAULTS[EventKind.NCCL_ERROR].summary}
)


def reports_loss(v: Verdict, raw: str, node: str | None) -> bool:
    """Whether a line read as `v` (its host `node`) reports only what its printer lost: a
    timeout or a lost connection (the rules' at_printer False), a remote peer named at fault, or
    an InfiniBand completion that lost its peer (retry exceeded, UCX's endpoint timeout; the
    module's sources). Such a line shows no fault of its printer's own beside another fault;
    a line whose host is the peer it blames ("Remote daemon: ... on node X") is that peer's."""
    if v.culprit and node and v.culprit.lower() == node.lower():
        return False
    if v.culprit:
        return True
    if not v.at_printer and v.category in _LOSS_KINDS and v.summary not in _UNSPECIFIC:
        return True
    if v.summary in _VICTIM_SUMMARIES and _PEER_LOST.search(raw):
        return True
    return _ucx_timeout_line(raw)


def _one_faulted_host(
    found: list[Finding], losses: list[Finding], printers: set[str]
) -> dict[str, list[Finding]]:
    """{host: its faults} when exactly one host that printed no loss shows a fault of its own
    in the losses' window (the peer UCX's timeouts name no host of); else {}. A loss whose
    printer the text does not show leaves none: the crashed host may be that printer."""
    if not all(f.event.node for f in losses):
        return {}
    by_host: dict[str, list[Finding]] = {}
    for g in found:
        host = g.verdict.culprit or (g.event.node if g.verdict.at_printer else None)
        if not host or not _fault(g.verdict) or not _near(g, losses):
            continue
        if any(_same_host(p, host) or _same_host(host.lower(), p) for p in printers):
            continue  # a printer's own fault (its HCA, its process) is no lost peer's
        by_host.setdefault(host.lower(), []).append(g)
    return by_host if len(by_host) == 1 else {}


def _peer(f: Finding, addresses: dict[str, str]) -> str | None:
    """The host the completion error's peer is, as the text shows it; None when unknown."""
    named = f.verdict.peer_named or f.verdict.culprit
    if not named:
        return gid_peer(f, addresses)
    if named.startswith(RANK_PEER):
        return addresses.get(named)  # a rank whose host the text does not show names none
    return host_of_address(named, addresses)


def host_of_address(peer: str, addresses: dict[str, str]) -> str:
    """The host whose own line the text ties a peer's address (an IPv6 zone dropped) to, as
    first_links maps one, else the peer as named."""
    return addresses.get(peer.lower().split("%")[0]) or peer


def gid_peer(f: Finding, addresses: dict[str, str]) -> str | None:
    """The host of the IPv4 of UCX's RoCE GID the finding's message names (readers_ucx.py),
    only where the text ties that address to a host."""
    return addresses.get(str(f.event.payload.get(PEER_KEY, ""))) if f.event.payload else None


def _own_link_fault(f: Finding, printers: set[str]) -> bool:
    """Whether the finding is a fabric fault of its own host (a port or link down, a NIC
    error) on a host that printed the losses, or on a host the text does not show."""
    v = f.verdict
    if v.category is not Category.INTERCONNECT or not v.root_cause or not v.at_printer:
        return False
    if v.summary in _VICTIM_SUMMARIES:
        return False
    return not f.event.node or f.event.node.lower() in printers


def _same_host(peer: str, host: str) -> bool:
    """Whether `host` is the peer (lower-case), or the peer is one of its interface names."""
    h = host.lower()
    return peer == h or peer.startswith(h + ".") or peer.startswith(h + "-")


def _on(g: Finding, peer: str) -> bool:
    """Whether the finding is the peer's own: printed there, or a launcher naming it."""
    if g.verdict.culprit:
        return _same_host(peer, g.verdict.culprit)
    return g.verdict.at_printer and bool(g.event.node) and _same_host(peer, g.event.node or "")


def _fault(v: Verdict) -> bool:
    """Whether the verdict is a process's own end: a crash signal, a CUDA error, an OOM kill, a
    GPU fault that drains the node. SIGKILL, SIGTERM, SIGABRT are left out: the launcher's
    teardown after the victims' own abort looks so (signals.py), and a bare SIGKILL read as a
    possible OOM kill is no OOM line of the kernel's."""
    if v.signal is not None:
        return v.signal in SELF_CRASH
    if not v.root_cause:
        return v.summary in _FAULT_SUMMARIES and v.category is Category.USER_CODE
    if v.category in (Category.OOM_HOST, Category.OOM_GPU):
        return True
    if v.category is Category.GPU_HARDWARE:
        return v.blame is Blame.NODE
    return v.category is Category.USER_CODE and v.summary in _FAULT_SUMMARIES


def _near(g: Finding, losses: list[Finding]) -> bool:
    """Whether the fault is in the window of the first loss of its peer; True when either has
    no clock in the text."""
    from correlator.explain.reasoning import when  # reasoning imports this module

    fault_at = when(g.event)
    times = [t for f in losses if (t := when(f.event)) is not None]
    if fault_at is None or not times:
        return True
    first = min(times)
    return first - BEFORE_S <= fault_at <= first + AFTER_S


def _raised(g: Finding, priority: int) -> Finding:
    """The peer's fault as the cause of the losses it explains (a crash the kernel reports is
    a symptom alone, but here the text shows what followed it), and as strong as they are."""
    told = replace(g.verdict, root_cause=True, priority=max(g.verdict.priority, priority))
    return replace(g, verdict=told)


def _unblamed(v: Verdict) -> Verdict:
    """A completion error that blames neither its printer nor the peer it names."""
    return replace(v, at_printer=False, culprit=None, peer_named=None)
