"""Pick the root cause among the events of one text, and what the text says about where."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from collector.parse.joblog import leading_ts
from correlator.explain.hosts import distinct
from correlator.explain.hosts_ranks import unresolved_rank
from correlator.explain.readers_edac import edac_ce_storms
from correlator.explain.readers_poison import memory_faults, sigbus_of_poison
from correlator.explain.readers_ray import dead_node_culprits
from correlator.explain.reasoning_peers import (
    fault_behind_transport,
    gid_peer,
    host_of_address,
    same_kind,
)
from correlator.rules import caused_by, classify_event
from correlator.rules.checks import shows_fault, with_cause
from correlator.rules.signals import SELF_CRASH, after_crash, decode
from correlator.taxonomy import Category, Verdict
from timeline.models import Event, EventKind


@dataclass(frozen=True)
class Finding:
    """One event and what it means alone."""

    event: Event
    verdict: Verdict


@dataclass(frozen=True)
class Conclusion:
    """The chosen verdict, the findings that support it, and the others seen."""

    verdict: Verdict
    support: list[Finding]  # the findings of the chosen kind of failure, reading order
    others: list[Finding]  # findings of other kinds (symptoms, weaker causes)


def findings(events: list[Event]) -> list[Finding]:
    """Events that mean something, each with its verdict; one memory module's EDAC CE lines
    that reach mcelog's DIMM trigger together (the agent reads them one a line) mean more, and
    a firmware record and the memory-failure lines naming its page are one fault, whose SIGBUS
    a process died of (readers_poison.py); a Ray actor's node death names that node
    (readers_ray.py)."""
    events = events + edac_ce_storms(events) + memory_faults(events)
    found = [Finding(ev, v) for ev in events if (v := classify_event(ev)) is not None]
    return dead_node_culprits(sigbus_of_poison(found))


def _rank(f: Finding) -> tuple[int, int, int, float]:
    v = f.verdict
    # Root causes beat symptoms; a known category beats an unknown code; then priority.
    return (int(v.root_cause), int(v.category is not None), v.priority, v.confidence)


def conclude(found: list[Finding], addresses: dict[str, str] | None = None) -> Conclusion | None:
    """The most likely root cause (hardware over user code, causes over symptoms), or None;
    `addresses` as for node_of (a peer named by address or rank -> its host)."""
    # Symptoms that name no kind of failure (a ChildFailedError, Xid 45 alone) are used only
    # when nothing else is there, so the answer can still say which rank and host died.
    found = teardown_after_crash(found)
    meaningful = [f for f in found if f.verdict.category is not None or f.verdict.root_cause]
    found = meaningful or found
    if not found:
        return None
    found = causes_beside_checks(found)
    best = max(found, key=_rank)
    best = crash_behind_timeouts(best, found)
    best, found = fault_behind_transport(best, found, addresses or {})

    def supports(f: Finding) -> bool:
        return same_kind(f.verdict, best.verdict)

    support = [f for f in found if supports(f)]
    others = [f for f in found if not supports(f)]
    confidence = min(0.99, best.verdict.confidence + 0.02 * (len(support) - 1))
    verdict = replace(best.verdict, confidence=round(confidence, 2))
    ordered = sorted(support, key=lambda f: -_rank(f)[2])
    return Conclusion(verdict=verdict, support=ordered, others=others)


def teardown_after_crash(found: list[Finding]) -> list[Finding]:
    """Each bare SIGKILL read as the launcher's teardown when the text shows a rank that
    crashed on its own (signals.after_crash, which the live correlator applies too)."""
    told = after_crash([f.verdict for f in found])
    pairs = zip(found, told, strict=True)
    return [f if v is f.verdict or v is None else Finding(f.event, v) for f, v in pairs]


def _beside(a: Event, b: Event) -> bool:
    """True when two lines may be one node's: the same host, or a host that is not shown."""
    return not a.node or not b.node or a.node.lower() == b.node.lower()


def causes_beside_checks(found: list[Finding]) -> list[Finding]:
    """A check failure that names no cause (NHC's "Check X returned N", rules/checks.py) is
    read as the recognised fault the text shows beside it on the same node (the check's own
    output, printed before it fails): the strongest such fault gives the category, the node
    keeps the blame, and the fault's lines count as strongly as the check's. A check with no
    such fault beside it keeps its own verdict."""
    out = list(found)
    faults = [f for f in found if shows_fault(f.verdict)]
    for i, check in enumerate(found):
        if not check.verdict.cause_unstated:
            continue
        near = [f for f in faults if _beside(f.event, check.event)]
        if not near:
            continue
        fault = max(near, key=_rank).verdict
        told = with_cause(check.verdict, fault, "beside")
        out[i] = Finding(check.event, told)
        shown = {id(f) for f in near if f.verdict.category is fault.category}
        for j, f in enumerate(found):
            if id(f) in shown:
                raised = max(out[j].verdict.priority, told.priority)
                out[j] = Finding(f.event, replace(f.verdict, blame=told.blame, priority=raised))
    return out


# Signals that end a rank without the collective's own abort: a crash (SIGSEGV, SIGBUS, SIGFPE,
# SIGILL) or a kill from outside (SIGKILL). SIGABRT is left out: ProcessGroupNCCL's watchdog
# ends a timed-out rank with std::abort(), so an -6 is as often the timeout's own end; SIGTERM
# and SIGINT are the launcher tearing the other ranks down (signals.py).
_CRASH_SIGNALS = SELF_CRASH | {9}


def _signal_of(ev: Event) -> int | None:
    """The signal a launcher says ended the process (-9, 137, "Signal 9"), if it says one."""
    signal, code = ev.payload.get("signal"), ev.payload.get("exit_code", ev.code)
    if isinstance(signal, int):
        return signal
    return decode(code, shell=True)[0] if isinstance(code, int) else None


def crash_behind_timeouts(best: Finding, found: list[Finding]) -> Finding:
    """When the strongest sign is a collective timeout (a symptom) and a launcher shows a rank
    on another host crashed or was killed (torchrun's ChildFailedError root cause, DeepSpeed's
    "exits with return code = -9"), that rank is what the others waited for: its verdict (the
    signal reasoner's, low confidence) wins and its host is the culprit. A host that only
    printed a timeout is never the culprit (issue #11)."""
    v = best.verdict
    if v.category is not Category.NCCL_TIMEOUT_UNKNOWN or v.root_cause:
        return best
    waited = {
        f.event.node.lower() for f in found if f.verdict.category is v.category and f.event.node
    }
    crashed = [
        f
        for f in found
        if f.event.kind is EventKind.CHILD_FAILED
        and f.verdict.category is not None
        and f.event.node
        and f.event.node.lower() not in waited
        and _signal_of(f.event) in _CRASH_SIGNALS
    ]
    return max(crashed, key=_rank) if crashed else best


def _as_named(peer: str, text_hosts: list[str]) -> str:
    """A peer's interface name ("gpu4-ib.site", "gpu4.site") as the host the text calls it."""
    low = peer.lower()
    for host in text_hosts:
        h = host.lower()
        if low != h and (low.startswith(h + ".") or low.startswith(h + "-")):
            return host
    return peer


def node_of(
    conclusion: Conclusion,
    text_hosts: list[str],
    addresses: dict[str, str] | None = None,
    *,
    suspects: list[str] | None = None,
) -> str | None:
    """The culprit host: the peer the evidence names (none when a node or GPU fault names
    several), else the one host whose own lines show the fault, else the one host of
    `suspects` (those of `text_hosts` that the text may show at fault, all of them when not
    given); never a host that only printed a timeout or a peer's failure (None when the text
    does not settle it). `addresses` maps an address to the host that the text shows owns it
    (hosts.own_addresses) or where a rank ran (hosts_ranks.rank_hosts)."""
    addresses = addresses or {}
    # a peer named by rank whose host the text does not show names no node
    named = [
        f
        for f in conclusion.support
        if f.verdict.culprit and not unresolved_rank(f.verdict.culprit, addresses)
    ]
    if named:
        links = first_links(named, distinct(text_hosts), addresses)
        if _independent_nodes(conclusion.verdict, links):
            return None
        peer = most_named([p for p, _ in links]) or first_named(links)
        return _as_named(peer, distinct(text_hosts)) if peer else None
    own = [f for f in conclusion.support if f.verdict.at_printer]
    if not own:
        return None  # only symptoms or peer errors, and no peer named: the printer is no culprit
    hosts = distinct([f.event.node for f in own if f.event.node])
    if len(hosts) == 1:
        return hosts[0]
    if hosts:  # several nodes show it: the one peer they all name, or the first to fail
        shared = shared_peer(own, hosts, addresses)
        if shared:
            return _as_named(shared, distinct(text_hosts))
        return first_in_time(own, conclusion.verdict)
    # a host the text shows only healthy or at an idle prompt is none (hosts_health.py)
    others = distinct(text_hosts if suspects is None else suspects)
    return others[0] if len(others) == 1 else None


# Verdicts whose named nodes each show their own fault: slurmctld setting several nodes DOWN
# (ping_nodes.c "Nodes %s not responding, setting DOWN"), several NotReady or failed nodes. They
# are independent faults, not a cascade in which the surviving ranks all name the one rank that
# went first, so how often each node is named settles nothing.
_INDEPENDENT = {Category.NODE, Category.GPU_HARDWARE}


def _independent_nodes(verdict: Verdict, links: list[tuple[str, Finding]]) -> bool:
    """True when a node or GPU fault names more than one node: several nodes showing the fault
    settle no culprit (the corpus policy), whichever is named most or first."""
    return verdict.category in _INDEPENDENT and len({p.lower() for p, _ in links}) > 1


def first_links(
    named: list[Finding], hosts: list[str], addresses: dict[str, str]
) -> list[tuple[str, Finding]]:
    """Each peer the findings name, with the line naming it, less the peers that are themselves
    seen losing another peer. A closed-by-peer / recv-from-peer line (NCCL socket.cc, Gloo
    pair.cc, TCPStore) says only that its remote end went away; a named peer whose own line
    reports losing someone else was alive to see that and went down after it (the abort
    cascade), so it is a later link of the chain, not the first. When every peer is seen so (a
    pair of hosts, each with ranks that lost the other's), the peers are kept as named and the
    counts decide."""
    # a peer named by address is the host whose own init line shows that interface, so lines
    # naming it by address and by name count as one peer
    pairs = [
        (host_of_address(p, addresses), f)
        for f in named
        if f.verdict.culprit and (p := _as_named(f.verdict.culprit, hosts))
    ]

    victims = {
        f.event.node.lower()
        for peer, f in pairs
        if f.event.node and f.event.node.lower() != peer.lower()
    }
    first = [(peer, f) for peer, f in pairs if peer.lower() not in victims]
    return first or pairs


def first_named(links: list[tuple[str, Finding]]) -> str | None:
    """The peer named by the earliest line, when the lines name different peers and the text's
    own clocks put that loss FIRST_MARGIN_S ahead of every other peer's: the first connection
    lost is to the rank that went first; the later ones are ranks ended by the abort."""
    first: dict[str, float] = {}
    for peer, f in links:
        at = when(f.event)
        if at is None:
            return None  # a loss without a clock cannot be ordered against the others
        first[peer.lower()] = min(first.get(peer.lower(), math.inf), at)
    ordered = sorted(first.items(), key=lambda kv: kv[1])
    if len(ordered) < 2 or ordered[1][1] - ordered[0][1] < FIRST_MARGIN_S:
        return None
    return next(peer for peer, _ in links if peer.lower() == ordered[0][0])


def most_named(peers: list[str]) -> str | None:
    """The peer that the most lines name, when one is named more often than any other (and more
    than once); a lone peer is named too; None for none. Every surviving rank that talked to a
    dead rank reports it, while the ranks that die of the abort afterwards are each reported by
    fewer."""
    if not peers:
        return None
    counts: dict[str, int] = {}
    spelled: dict[str, str] = {}
    for p in peers:
        counts[p.lower()] = counts.get(p.lower(), 0) + 1
        spelled.setdefault(p.lower(), p)
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    if len(ranked) == 1:
        return spelled[ranked[0][0]]
    (top, n), (_, second) = ranked[0], ranked[1]
    return spelled[top] if n > second and n >= 2 else None


def shared_peer(
    own: list[Finding], hosts: list[str], addresses: dict[str, str] | None = None
) -> str | None:
    """The one peer that every host's own failure names (InfiniBand completions that several
    hosts got from one peer; UCX's by the GID `addresses` ties to a host), when it is none of
    those hosts; else None. A peer named by address is the host the text ties it to, if any."""
    addresses = addresses or {}
    peers = [
        host_of_address(p, addresses) if (p := f.verdict.peer_named) else gid_peer(f, addresses)
        for f in own
    ]
    named = {p.lower() if p else "" for p in peers}
    if len(named) != 1 or "" in named or named & {h.lower() for h in hosts}:
        return None
    return next(p for p in peers if p)


_CASCADE = {Category.USER_CODE, Category.OOM_HOST, Category.OOM_GPU}
FIRST_MARGIN_S = 1.0


def first_in_time(own: list[Finding], verdict: Verdict) -> str | None:
    """The host whose failure came first, when one job's ranks failed on several hosts and the
    text's own timestamps put one host ahead by FIRST_MARGIN_S; else None. Independent faults
    of several nodes (drained nodes, link errors seen from both ends) are not a cascade."""
    if verdict.category not in _CASCADE:
        return None
    first: dict[str, float] = {}
    for f in own:
        if not f.event.node:
            return None
        at = when(f.event)
        key = f.event.node.lower()
        first.setdefault(key, math.inf)
        if at is not None:  # a line without a clock (pdsh's own report) leaves its host's time
            first[key] = min(first[key], at)
    ordered = sorted(first.items(), key=lambda kv: kv[1])
    # a host none of whose lines shows a clock cannot be ordered against the others
    if len(ordered) < 2 or ordered[-1][1] == math.inf:
        return None
    if ordered[1][1] - ordered[0][1] < FIRST_MARGIN_S:
        return None
    return next(f.event.node for f in own if f.event.node and f.event.node.lower() == ordered[0][0])


def when(ev: Event) -> float | None:
    """When the event happened by the text's own clock (epoch seconds), or None."""
    if ev.ts > 0 and not ev.payload.get("ts_unknown") and not ev.payload.get("ts_is_uptime"):
        return ev.ts
    stamp = ev.payload.get("time")
    if ev.kind is EventKind.CHILD_FAILED and isinstance(stamp, str):
        # torch elastic's failure table: "time : 2024-06-16_20:34:40", the failure's own time
        # (ProcessFailure.timestamp_isoformat: datetime.isoformat(sep="_"))
        return leading_ts(stamp.replace("_", "T", 1))
    first = (ev.raw or "").split("\n", 1)[0]
    if ev.node and first.startswith(f"{ev.node}: "):
        # pdsh/DeepSpeed's "host: " in front of the line's own timestamp ("gpu-02: [2024-...")
        return leading_ts(first[len(ev.node) + 2 :])
    return None


def gpu_of(conclusion: Conclusion) -> tuple[str | None, int | None]:
    """(PCI bus id, index) of the one GPU the supporting evidence names, if only one."""
    ids = {f.event.pci_bus_id for f in conclusion.support if f.event.pci_bus_id}
    idx = {f.event.payload.get("gpu_index") for f in conclusion.support}
    idx.discard(None)
    bus = ids.pop() if len(ids) == 1 else None
    index = idx.pop() if len(idx) == 1 else None
    return bus, index if isinstance(index, int) else None


def xid_of(conclusion: Conclusion) -> int | None:
    """The Xid code of the strongest Xid evidence, if the conclusion rests on one."""
    for f in conclusion.support:
        if f.event.kind is EventKind.XID and f.event.code is not None:
            return caused_by(f.event.raw or "") or f.event.code
    return None


def job_and_user(conclusion: Conclusion) -> tuple[str | None, str | None]:
    """Job id and user the supporting evidence shows, if any."""
    job = next((f.event.job_id for f in conclusion.support if f.event.job_id), None)
    user = next(
        (u for f in conclusion.support if isinstance(u := f.event.payload.get("user"), str) and u),
        None,
    )
    return job, user
