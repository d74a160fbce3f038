"""The fleet grid as the page's canvas script draws it: compact arrays, a few bytes per GPU.

Each node is [name, group index, drained (0 no, 1 by a person, 2 by us), state letters,
utilizations (-1 unknown), job refs, GPU indexes]; jobs are [job id, user]. Two run-length
shortcuts keep 10k-100k GPUs small: job refs is one number when every GPU of the node has the
same (-1: none), and GPU indexes is null when they are 0, 1, 2, ... in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from markupsafe import Markup
from orjson import Fragment

from timeline.fleet import (
    INDEX,
    NODE,
    OUR_DRAIN_PREFIX,
    STATE_LETTERS,
    UTIL_GPU,
    Classified,
    GpuRow,
    GpuState,
    NodeView,
    bulk_allocation,
)
from timeline.fleet_cells import JobRow, NodeCells
from timeline.history import Holder

STATE_CODES = STATE_LETTERS
STATE_COLORS = {
    GpuState.BUSY: "#2e7d32",
    GpuState.IDLE_ALLOCATED: "#f9a825",
    GpuState.FREE: "#90a4ae",
    GpuState.FAILING: "#c62828",
    GpuState.STALE: "#5d4037",
}
STATE_LABELS = {
    GpuState.BUSY: "busy",
    GpuState.IDLE_ALLOCATED: "allocated but idle",
    GpuState.FREE: "free",
    GpuState.FAILING: "failing",
    GpuState.STALE: "no telemetry",
}
Keep = Callable[[GpuRow, Holder | None], bool]


@dataclass
class Grid:
    """The grid's payload, its counts by state, and its drained nodes."""

    groups: list[str]
    nodes: list[list[Any]]
    jobs: list[list[str]]
    counts: dict[GpuState, int]
    drained_ours: int = 0
    drained_people: int = 0
    _json: Markup | None = field(default=None, repr=False)

    def payload(self) -> dict[str, Any]:
        """The JSON the page embeds."""
        return {
            "groups": self.groups,
            "nodes": self.nodes,
            "jobs": self.jobs,
            "colors": {STATE_CODES[s]: c for s, c in STATE_COLORS.items()},
            "labels": {STATE_CODES[s]: lbl for s, lbl in STATE_LABELS.items()},
        }

    def script_json(self) -> Markup:
        """The payload as JSON safe inside a <script> element (serialized once per grid)."""
        if self._json is None:
            # Imported here: web.pages imports this module (through the fleet page).
            from web.pages.templating import script_safe

            self._json = Markup(script_safe(orjson.dumps(self.payload()).decode()))
        return self._json


def _new_entry(node: NodeView, groups: dict[str, int]) -> list[Any]:
    gi = groups.setdefault(node.group, len(groups))
    drained = 0
    if node.drained:  # asked once per node: drained_by_us would ask it again
        drained = 2 if (node.reason or "").startswith(OUR_DRAIN_PREFIX) else 1
    return [node.name, gi, drained, [], [], [], []]


def _compact(entry: list[Any]) -> list[Any]:
    states, refs, indexes = entry[3], entry[5], entry[6]
    entry[3] = "".join(states)
    if len(set(refs)) == 1:
        entry[5] = refs[0]
    if indexes == list(range(len(indexes))):
        entry[6] = None
    return entry


def build_grid(
    nodes: dict[str, NodeView], gpus: list[Classified], keep: Keep | None = None
) -> Grid:
    """The grid of the classified GPUs that `keep` passes (all when None), nodes by name."""
    with bulk_allocation():
        return _build_grid(nodes, gpus, keep)


def _build_grid(nodes: dict[str, NodeView], gpus: list[Classified], keep: Keep | None) -> Grid:
    groups: dict[str, int] = {}
    jobs: dict[str, int] = {}
    job_rows: list[list[str]] = []
    rows: dict[str, list[Any]] = {}
    counts = dict.fromkeys(GpuState, 0)
    codes = STATE_CODES
    current, st, ut, rf, ix = None, [], [], [], []  # the lists of the node being filled
    for row, alloc, _, state in gpus:  # hot loop: once per GPU
        if keep is not None and not keep(row, alloc):
            continue
        name = row[NODE]
        if name != current:
            entry = rows.get(name)
            if entry is None:
                entry = rows[name] = _new_entry(nodes[name], groups)
            current, st, ut, rf, ix = name, entry[3], entry[4], entry[5], entry[6]
        st.append(codes[state])
        util = row[UTIL_GPU]
        ut.append(-1 if util is None else round(util))
        if alloc is None:
            rf.append(-1)
        else:
            ref = jobs.get(alloc.job_id)
            if ref is None:
                ref = jobs[alloc.job_id] = len(job_rows)
                job_rows.append([alloc.job_id, alloc.user or ""])
            rf.append(ref)
        index = row[INDEX]
        ix.append(len(ix) if index is None else index)
        counts[state] += 1
    entries = [_compact(rows[n]) for n in sorted(rows)]
    return Grid(
        groups=list(groups),
        nodes=entries,
        jobs=job_rows,
        counts=counts,
        drained_ours=sum(1 for e in entries if e[2] == 2),
        drained_people=sum(1 for e in entries if e[2] == 1),
    )


def grid_from_cells(cells: list[NodeCells], held_by: dict[int, JobRow]) -> Grid:
    """The unfiltered grid from PostgreSQL's per-node classification (nodes by name): the
    same grid as build_grid on the per-GPU rows, made per node instead of per GPU."""
    groups: dict[str, int] = {}
    by_job: dict[str, int] = {}
    job_rows: list[list[str]] = []
    ref_of: dict[int | None, int] = {None: -1}  # holder row id -> index in job_rows

    def new_ref(row_id: int) -> int:
        job = held_by[row_id]
        found = by_job.get(job.job_id)  # one grid job per job id, as build_grid keys them
        if found is None:
            found = by_job[job.job_id] = len(job_rows)
            job_rows.append([job.job_id, job.user or ""])
        ref_of[row_id] = found
        return found

    entries: list[list[Any]] = []
    identity: dict[int, list[int]] = {}
    drained_by = [0, 0, 0]
    # Hot loop, once per node (12.5k at 100k GPUs): lookups inlined, slow paths rare.
    for node, group, drained, states, utils, job, jobs, indexes in cells:
        if jobs is None:
            refs: int | list[int] | None = ref_of.get(job)
            if refs is None:
                refs = new_ref(job)  # type: ignore[arg-type]  # None is in ref_of
        else:
            refs = [ref_of[j] if j in ref_of else new_ref(j) for j in jobs]  # type: ignore[arg-type]
        if None in indexes:  # as build_grid: an unknown index is the GPU's position
            indexes = [k if i is None else i for k, i in enumerate(indexes)]
        n = len(indexes)
        same = identity.get(n)
        if same is None:
            same = identity[n] = list(range(n))
        gi = groups.get(group)
        if gi is None:
            gi = groups[group] = len(groups)
        drained_by[drained] += 1
        # The utilizations arrive as JSON text: embedded as they are, never made into lists.
        entries.append(
            [node, gi, drained, states, Fragment(utils), refs, None if indexes == same else indexes]
        )
    letters = "".join([c.states for c in cells])
    return Grid(
        groups=list(groups),
        nodes=entries,
        jobs=job_rows,
        counts={s: letters.count(code) for s, code in STATE_CODES.items()},
        drained_ours=drained_by[2],
        drained_people=drained_by[1],
    )


def options_from_cells(held_by: dict[int, JobRow], models: list[str]) -> dict[str, list[str]]:
    """The values each filter can take (as web.fleetstate.filter_options gives them), from
    the jobs holding the grid's GPUs."""
    holders = held_by.values()
    return {
        "partitions": sorted({h.partition for h in holders if h.partition}),
        "users": sorted({h.user for h in holders if h.user}),
        "accounts": sorted({h.account for h in holders if h.account}),
        "models": sorted(set(models) - {""}),
    }


def decode_node(entry: list[Any]) -> list[tuple[int, str, int, int]]:
    """(GPU index, state letter, utilization, job ref) for each GPU of one grid node: what
    the page's script reads from the compact form (tests check the two agree)."""
    states, utils, refs, indexes = entry[3], entry[4], entry[5], entry[6]
    return [
        (
            i if indexes is None else indexes[i],
            states[i],
            utils[i],
            refs if isinstance(refs, int) else refs[i],
        )
        for i in range(len(states))
    ]
