"""The fleet at a glance: every GPU classified busy, allocated-but-idle, free, failing or stale.

Whether a GPU is failing is not decided here: the caller passes the failing set (built by the
correlator from its open incidents), because meaning lives in the correlator.
"""

from __future__ import annotations

import enum
import gc
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from sqlalchemy.orm import Session

from timeline import fleet_read, history, queries, samples
from timeline.history import Holder
from timeline.samples_sql import SqlSampleStore

# Node labels that name a group worth showing the grid by, first match wins: Slurm partition or
# Kubernetes namespace-ish labels, racks, then the NVLink domain (GPU operator's clique label).
GROUP_LABELS = (
    "partitions",  # the Slurm source's node label: "gpu,debug"
    "partition",
    "fleetmedic.io/partition",
    "rack",
    "topology.kubernetes.io/rack",
    "nvidia.com/gpu.clique",
)
DRAIN_WORDS = ("DRAIN", "DOWN", "FAIL", "MAINT", "REBOOT", "CORDON")
_DRAINED = re.compile("|".join(DRAIN_WORDS))  # one search per node, not six (10k+ nodes)
# The sample fields the grid and the fleet API show; the rest of a GPU's newest row is not read.
GRID_FIELDS = ("util_gpu", "power_w", "mem_used_mb", "mem_total_mb", "temp_gpu")
GRID_GPU_COLUMNS = ("uuid", "node", "index", "pci_bus_id", "name")
# A GPU's newest row is a plain tuple of these, in this order: 10k-100k are made per build of
# the fleet and a dict per GPU cost more to make than the read itself (~2x at 100k GPUs).
ROW_KEYS = (*GRID_GPU_COLUMNS, *GRID_FIELDS, "ts")
UUID, NODE, INDEX, PCI_BUS_ID, NAME = range(len(GRID_GPU_COLUMNS))
UTIL_GPU = ROW_KEYS.index("util_gpu")
TS = ROW_KEYS.index("ts")
GpuRow = tuple[Any, ...]
STALE_AFTER_S = 120.0  # no sample for this long: the GPU shows as stale
OUR_DRAIN_PREFIX = "fleetmedic:"  # the healer marks its own drains with this reason prefix


class GpuState(enum.StrEnum):
    """What a person wants to know about a GPU first."""

    BUSY = "busy"
    IDLE_ALLOCATED = "idle_allocated"  # a job holds it but it does no work
    FREE = "free"
    FAILING = "failing"
    STALE = "stale"  # no telemetry for a while: the agent or the node is gone


# One letter per state: the grid's compact form, and what PostgreSQL returns per GPU when it
# classifies the fleet itself (timeline.fleet_cells).
STATE_LETTERS = {
    GpuState.BUSY: "b",
    GpuState.IDLE_ALLOCATED: "i",
    GpuState.FREE: "f",
    GpuState.FAILING: "x",
    GpuState.STALE: "s",
}


@dataclass(frozen=True)
class Failing:
    """Why a GPU or node is failing, and the incident that says so."""

    reason: str
    incident_id: int | None = None


@dataclass
class FailingSet:
    """GPUs (by uuid, or "node|pci bus id") and whole nodes that open incidents blame."""

    gpus: dict[str, Failing] = field(default_factory=dict)
    nodes: dict[str, Failing] = field(default_factory=dict)

    def for_gpu(self, node: str, uuid: str, pci_bus_id: str | None) -> Failing | None:
        """The failure blamed on this GPU, or on its whole node."""
        found = self.gpus.get(uuid)
        if found is None and pci_bus_id:
            found = self.gpus.get(f"{node}|{pci_bus_id}")
        return found or self.nodes.get(node)


@dataclass(slots=True)
class GpuView:
    """One GPU cell of the fleet grid."""

    uuid: str
    node: str
    index: int | None
    pci_bus_id: str | None
    name: str | None
    state: GpuState
    util_gpu: float | None
    power_w: float | None
    mem_used_mb: float | None
    mem_total_mb: float | None
    temp_gpu: float | None
    sample_ts: float | None
    job_id: str | None = None
    user: str | None = None
    account: str | None = None
    partition: str | None = None
    reason: str | None = None  # why it is failing, in a few words
    incident_id: int | None = None  # the open incident that blames it


@dataclass
class NodeView:
    """A row of the grid: one node and its GPUs."""

    name: str
    state: str | None
    reason: str | None
    group: str = "all"
    reason_user: str | None = None
    reason_ts: float | None = None
    gpus: list[GpuView] = field(default_factory=list)

    @property
    def drained(self) -> bool:
        """The scheduler keeps jobs off this node (drained, down, cordoned)."""
        word = (self.state or "").upper()
        return _DRAINED.search(word) is not None

    @property
    def drained_by_us(self) -> bool:
        """Drained by fleetmedic's healer (its reason carries our prefix)."""
        return self.drained and (self.reason or "").startswith(OUR_DRAIN_PREFIX)


def gpu_row(values: Mapping[str, Any]) -> GpuRow:
    """The row of a mapping of ROW_KEYS (a missing key reads as None)."""
    return tuple(values.get(k) for k in ROW_KEYS)


def row_dict(row: GpuRow) -> dict[str, Any]:
    """A row as a dict of ROW_KEYS."""
    return dict(zip(ROW_KEYS, row, strict=True))


def classify(
    row: Mapping[str, Any],
    *,
    now: float,
    allocated: bool,
    failing: bool,
    idle_threshold: float,
    stale_after_s: float,
) -> GpuState:
    """The state of one GPU from its newest sample, its allocation and the failing set."""
    if failing:
        return GpuState.FAILING
    if row.get("ts") is None or now - float(row["ts"]) > stale_after_s:
        return GpuState.STALE
    util = row.get("util_gpu") or 0.0
    if allocated:
        return GpuState.BUSY if util > idle_threshold else GpuState.IDLE_ALLOCATED
    return GpuState.BUSY if util > idle_threshold else GpuState.FREE


def node_group(node: dict[str, Any]) -> str:
    """The grid group of a node: its partition, rack or NVLink domain label, else "all".

    Only a non-empty string names a group (Kubernetes and Slurm give labels as strings; a
    number or list there is not a group name)."""
    labels = node.get("labels") or {}
    if isinstance(labels, dict):
        for key in GROUP_LABELS:
            value = labels.get(key)
            if value and isinstance(value, str):
                return f"{key.rsplit('/', 1)[-1]}={value}"
    return "all"


@contextmanager
def bulk_allocation() -> Iterator[None]:
    """Cyclic GC paused while a hot loop makes 10k-100k small objects that all survive: each
    collection would walk the whole heap (the cached fleet too) and found nothing to free;
    at 100k GPUs it doubled the loop's time. Reference counting still frees as usual."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _NodeHolders(NamedTuple):
    whole: Holder | None  # a job holding the whole node
    by_index: dict[int, Holder]


def _holders_by_node(allocs: list[Holder]) -> dict[str, _NodeHolders]:
    out: dict[str, _NodeHolders] = {}
    for a in allocs:
        held = out.get(a.node)
        if held is None:
            held = out[a.node] = _NodeHolders(None, {})
        if a.gpu_index is None or a.gpu_index < 0:
            out[a.node] = held._replace(whole=a)
        else:
            held.by_index[a.gpu_index] = a
    return out


def by_node_and_pci(gpus: dict[str, Failing]) -> dict[str, dict[str, Failing]]:
    """The "node|pci bus id" keys of `gpus` as node -> pci bus id -> failure: every split at
    a "|" (so the lookup equals gpus.get(f"{node}|{pci}"), with no key built per GPU)."""
    out: dict[str, dict[str, Failing]] = {}
    for key, bad in gpus.items():
        for i, char in enumerate(key):
            if char == "|":
                out.setdefault(key[:i], {})[key[i + 1 :]] = bad
    return out


def _gpu_view(row: GpuRow, alloc: Holder | None, bad: Failing | None, state: GpuState) -> GpuView:
    # Positional: this runs once per GPU on every fleet page (10k+ times).
    uuid, node, index, pci_bus_id, name, util, power, mem_used, mem_total, temp, ts = row
    view = GpuView(uuid, node, index, pci_bus_id, name, state, util, power, mem_used,
                   mem_total, temp, ts)  # fmt: skip
    if alloc is not None:
        view.job_id, view.user = alloc.job_id, alloc.user
        view.account, view.partition = alloc.account, alloc.partition
    if bad is not None:
        view.reason, view.incident_id = bad.reason, bad.incident_id
    return view


Classified = tuple[GpuRow, "Holder | None", "Failing | None", GpuState]


@dataclass(frozen=True)
class FleetInputs:
    """What the fleet is classified from: the newest row per GPU, who holds what, the nodes."""

    latest: list[GpuRow]  # ROW_KEYS of each GPU
    holders: list[Holder]
    nodes: list[dict[str, Any]]


def read_latest(session: Session) -> list[GpuRow]:
    """Each known GPU with its newest sample as a row of ROW_KEYS, grouped by node (the one
    read of telemetry the grid makes)."""
    if isinstance(samples.store(), SqlSampleStore):  # one join through the driver, same rows
        return fleet_read.latest_tuples(session, gpu_columns=GRID_GPU_COLUMNS, fields=GRID_FIELDS)
    found = queries.latest_gpu_samples(session, fields=GRID_FIELDS, gpu_columns=GRID_GPU_COLUMNS)
    return list(map(gpu_row, found))


def read_inputs(session: Session, *, now: float) -> FleetInputs:
    """The three reads behind the fleet grid (each a narrow read of current state)."""
    with bulk_allocation():  # rows per GPU and per allocation, all kept
        latest = read_latest(session)
        holders = fleet_read.holders_at(session, at=now)
        return FleetInputs(latest, holders, history.node_states(session))


def classify_all(
    session: Session,
    *,
    now: float,
    failing: FailingSet | None = None,
    idle_threshold: float = 5.0,
    stale_after_s: float = STALE_AFTER_S,
) -> tuple[dict[str, NodeView], list[Classified]]:
    """Every node (GPUs not attached) and every GPU as (newest row, holder, failure, state).

    The one classification of the fleet: the grid, /api/v1/fleet and /metrics all read it.
    """
    return classify_inputs(
        read_inputs(session, now=now), now=now, failing=failing,
        idle_threshold=idle_threshold, stale_after_s=stale_after_s,
    )  # fmt: skip


def classify_inputs(
    inputs: FleetInputs,
    *,
    now: float,
    failing: FailingSet | None = None,
    idle_threshold: float = 5.0,
    stale_after_s: float = STALE_AFTER_S,
) -> tuple[dict[str, NodeView], list[Classified]]:
    """classify_all on rows already read; same result as `classify` applied to each GPU."""
    with bulk_allocation():
        return _classify_inputs(inputs, now, failing, idle_threshold, stale_after_s)


def _classify_inputs(
    inputs: FleetInputs,
    now: float,
    failing: FailingSet | None,
    idle_threshold: float,
    stale_after_s: float,
) -> tuple[dict[str, NodeView], list[Classified]]:
    failing = failing or FailingSet()
    held_by_node = _holders_by_node(inputs.holders)
    nodes = {
        n["name"]: NodeView(n["name"], n["state"], n["reason"], node_group(n),
                            n.get("reason_user"), n.get("reason_ts"))
        for n in inputs.nodes
    }  # fmt: skip
    bad_gpus, bad_nodes = failing.gpus, failing.nodes
    bad_pcis = by_node_and_pci(bad_gpus)
    busy, idle, free = GpuState.BUSY, GpuState.IDLE_ALLOCATED, GpuState.FREE
    out: list[Classified] = []
    append = out.append
    # Hot loop (once per GPU, 10k-100k times): per-node lookups are done once per node run
    # (rows come grouped by node), and `classify` is inlined.
    current: str | None = None
    held: _NodeHolders | None = None
    node_bad: Failing | None = None
    node_pcis: dict[str, Failing] | None = None
    for row in inputs.latest:
        node = row[NODE]
        if node != current:
            current, held, node_bad = node, held_by_node.get(node), bad_nodes.get(node)
            node_pcis = bad_pcis.get(node)
            if node not in nodes:
                nodes[node] = NodeView(node, None, None)
        alloc = None if held is None else (held.by_index.get(row[INDEX]) or held.whole)
        bad = bad_gpus.get(row[UUID]) if bad_gpus else None
        if bad is None and node_pcis and row[PCI_BUS_ID]:
            bad = node_pcis.get(row[PCI_BUS_ID])
        bad = bad or node_bad
        ts = row[TS]
        if bad is not None:
            state = GpuState.FAILING
        elif ts is None or now - float(ts) > stale_after_s:
            state = GpuState.STALE
        elif (row[UTIL_GPU] or 0.0) > idle_threshold:
            state = busy
        else:
            state = free if alloc is None else idle
        append((row, alloc, bad, state))
    return nodes, out


def fleet_view(
    session: Session,
    *,
    now: float,
    failing: FailingSet | None = None,
    idle_threshold: float = 5.0,
    stale_after_s: float = STALE_AFTER_S,
) -> list[NodeView]:
    """Every node with its GPUs classified, for /api/v1/fleet."""
    nodes, gpus = classify_all(session, now=now, failing=failing, idle_threshold=idle_threshold,
                               stale_after_s=stale_after_s)  # fmt: skip
    return views_of(nodes, gpus)


def views_of(nodes: dict[str, NodeView], gpus: list[Classified]) -> list[NodeView]:
    """Nodes by name with a view of each of their GPUs (new objects: the inputs stay as they
    are, so a cached classification can be shown many times)."""
    grouped: dict[str, list[GpuView]] = defaultdict(list)
    for row, alloc, bad, state in gpus:
        grouped[row[NODE]].append(_gpu_view(row, alloc, bad, state))
    return [replace(nodes[name], gpus=grouped.get(name, [])) for name in sorted(nodes)]
