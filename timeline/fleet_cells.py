"""The fleet classified by PostgreSQL itself, one row per node: what the grid draws at 100k GPUs.

`fleet.classify_inputs` reads every GPU's newest row and holder into Python and classifies
them there: at 100k GPUs that is several passes over 100k objects (about 1.5 s on 2 cores).
Here one statement does the joins and the classification in the database and hands back one
row per node with its GPUs' states as letters and their utilizations, holders and indexes as
arrays, so Python works per node (12.5k), not per GPU. The meaning is the same as
`fleet.classify_inputs` (tests/timeline/test_fleet_cells.py builds random fleets and compares
both); PostgreSQL only, since SQLite before 3.44 has neither arrays nor ordered aggregates
(the fleet page on SQLite stays on the Python path, which meets its target there).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy.orm import Session

from timeline.db import driver_connection
from timeline.fleet import (
    DRAIN_WORDS,
    GROUP_LABELS,
    OUR_DRAIN_PREFIX,
    STATE_LETTERS,
    FailingSet,
    GpuState,
    bulk_allocation,
    by_node_and_pci,
)
from timeline.fleet_read import NEWEST_SAMPLE_JOIN, open_allocations_sql


class NodeCells(NamedTuple):
    """One node of the classified fleet: its GPUs in index order, one entry each."""

    node: str
    group: str  # as fleet.node_group names it
    drained: int  # 0 no, 1 by a person, 2 by fleetmedic's healer
    states: str  # one STATE_LETTERS letter per GPU
    utils: list[int]  # -1: unknown
    job: int | None  # where one job holds every GPU: its row in `jobs` (its id)
    jobs: list[int | None] | None  # else each GPU's holder (None where free); None if none
    indexes: list[int | None]


class JobRow(NamedTuple):
    """What the grid and its filters show of a job that holds GPUs."""

    job_id: str
    user: str | None
    account: str | None
    partition: str | None


def _letter(state: GpuState) -> str:
    return f"'{STATE_LETTERS[state]}'"


def _group_sql() -> str:
    # node_group's rule: the first of GROUP_LABELS whose value is a non-empty string. The
    # labels are parsed once per node (jsonb), not once per key tried.
    arms = []
    for key in GROUP_LABELS:
        short = key.rsplit("/", 1)[-1]
        arms.append(
            f"WHEN jsonb_typeof(lb -> '{key}') = 'string' AND lb ->> '{key}' <> '' "
            f"THEN '{short}=' || (lb ->> '{key}')"
        )
    return f"CASE {' '.join(arms)} ELSE 'all' END"


# Ordered aggregates in PostgreSQL 15 sort every group once per aggregate; instead the rows
# arrive sorted from the inner query and a GroupAggregate keeps that order (PostgreSQL's
# documented "sorted subquery" form). `indexes` lets the reader check the order per node.
# Who holds which GPU is not joined here (a 100k-row join cost a third of the statement):
# HOLDERS_SQL reads it per node and Python lays it over the GPUs (free -> allocated-but-idle).
SQL = f"""
SELECT c.node, {_group_sql()},
  CASE WHEN n.state ~* '{"|".join(DRAIN_WORDS)}'
       THEN CASE WHEN starts_with(n.reason, '{OUR_DRAIN_PREFIX}') THEN 2 ELSE 1 END
       ELSE 0 END,
  c.st, c.ut, c.idx
FROM (
  SELECT node, string_agg(st, '') AS st, array_agg(ut) AS ut, array_agg(idx) AS idx
  FROM (
    SELECT g.node COLLATE "C" AS node, g."index" AS idx,
      CASE WHEN g.uuid = ANY(%(bad_gpus)s) OR g.node = ANY(%(bad_nodes)s)
                OR (g.pci_bus_id = ANY(%(bad_pcis)s)
                    AND g.node || '|' || g.pci_bus_id = ANY(%(bad_gpus)s))
             THEN {_letter(GpuState.FAILING)}
           WHEN l.ts_ms IS NULL
                OR %(now)s - CAST(l.ts_ms AS DOUBLE PRECISION) / 1000 > %(stale)s
             THEN {_letter(GpuState.STALE)}
           WHEN COALESCE(l.util_gpu, 0) > %(idle)s THEN {_letter(GpuState.BUSY)}
           ELSE {_letter(GpuState.FREE)} END AS st,
      CASE WHEN l.util_gpu IS NULL THEN -1 ELSE CAST(round(l.util_gpu) AS INTEGER) END AS ut
    FROM gpus g {NEWEST_SAMPLE_JOIN}
    ORDER BY 1, 2, g.uuid
  ) cells GROUP BY node
) c
LEFT JOIN LATERAL (SELECT n.labels::jsonb AS lb, n.state, n.reason FROM nodes n
                   WHERE n.name = c.node) n ON true
ORDER BY c.node -- in the "C" collation: UTF-8 byte order, which is how Python orders str
"""

# history.holders_at's rows, one per GPU (or per node: index -1, the whole node): where two
# claim the same, the newest wins, as in fleet.classify_inputs (holders oldest first, the
# last kept). Sorted by bytes ("C"): the same groups as the default collation, for less.
HOLDERS_SQL = f"""
SELECT node, array_agg(gi), array_agg(id) FROM (
  SELECT DISTINCT ON (a.node COLLATE "C", gi) a.node,
    CASE WHEN a.gpu_index < 0 THEN -1 ELSE a.gpu_index END AS gi, j.id
  {open_allocations_sql("%(now)s")}
  ORDER BY a.node COLLATE "C", gi, a.start_ts DESC, j.id DESC
) held GROUP BY node
"""

_FREE, _IDLE = STATE_LETTERS[GpuState.FREE], STATE_LETTERS[GpuState.IDLE_ALLOCATED]
Held = tuple[list[int], list[int]]  # a node's GPU indexes (-1: all) and their holders' ids


def _hold(
    states: str, indexes: list[int | None], held: Held | None
) -> tuple[str, int | None, list[int | None] | None]:
    """A node's letters, its one holder or each GPU's, from its holders: a GPU's own
    allocation first, else the whole node's (fleet.classify_inputs' rule)."""
    if held is None:
        return states, None, None
    gis, ids = held
    first = ids[0]
    # The common forms first: one job on every GPU by index, or on the whole node.
    if ids.count(first) == len(ids) and (gis == indexes or gis == [-1]):
        return states.replace(_FREE, _IDLE), first, None
    by_index = dict(zip(gis, ids, strict=True))
    whole = by_index.pop(-1, None)
    jobs = [whole if i is None else by_index.get(i, whole) for i in indexes]
    if jobs.count(None) == len(jobs):
        return states, None, None
    letters = "".join(
        _IDLE if s == _FREE and j is not None else s for s, j in zip(states, jobs, strict=True)
    )
    if jobs.count(jobs[0]) == len(jobs):
        return letters, jobs[0], None
    return letters, None, jobs


def node_cells(
    session: Session,
    *,
    now: float,
    failing: FailingSet,
    idle_threshold: float,
    stale_after_s: float,
) -> tuple[list[NodeCells], dict[int, JobRow]]:
    """Every node that has GPUs, classified as fleet.classify_inputs would (PostgreSQL only),
    ordered by name as Python orders strings; and the jobs that hold their GPUs, by row id."""
    params: dict[str, Any] = {
        "now": now,
        "bad_gpus": list(failing.gpus),
        # The bus ids of those keys read as "node|pci bus id" (an empty one never matches): a
        # cheap test before the concatenation, which would otherwise be built for 100k GPUs.
        "bad_pcis": sorted(
            {p for pcis in by_node_and_pci(failing.gpus).values() for p in pcis} - {""}
        ),
        "bad_nodes": list(failing.nodes),
        "stale": stale_after_s,
        "idle": idle_threshold,
    }
    with bulk_allocation():  # 12.5k rows of lists, all kept: no GC passes over them meanwhile
        return _read(session, params)


def _read(session: Session, params: dict[str, Any]) -> tuple[list[NodeCells], dict[int, JobRow]]:
    cur = driver_connection(session).cursor(binary=True)
    try:
        # The sorts and hashes of 100k rows spill to disk under the default 4 MB.
        cur.execute("SET LOCAL work_mem = '64MB'")
        cur.execute(HOLDERS_SQL, params)
        held_by: dict[str, Held] = {node: (gis, ids) for node, gis, ids in cur.fetchall()}
        cur.execute(SQL, params)
        out: list[NodeCells] = []
        held: set[int | None] = set()
        for node, group, drained, states, utils, indexes in cur.fetchall():
            # The sorted-subquery form is documented to hold for a plain GroupAggregate; if a
            # plan ever reordered rows, fail loudly rather than draw GPUs in the wrong places.
            if None in indexes or indexes != sorted(indexes):
                _check_order(indexes)
            states, job, jobs = _hold(states, indexes, held_by.get(node))
            if jobs is None:
                held.add(job)
            else:
                held.update(jobs)
            out.append(NodeCells(node, group, drained, states, utils, job, jobs, indexes))
        held.discard(None)
        # One text parameter: psycopg's dumping of a list of 10k ints cost more than the query.
        cur.execute(
            'SELECT id, job_id, "user", account, partition FROM jobs '
            "WHERE id = ANY(CAST(string_to_array(%s, ',') AS BIGINT[]))",
            (",".join(map(str, held)),),
        )
        return out, {row[0]: JobRow(*row[1:]) for row in cur.fetchall()}
    finally:
        cur.close()


def _check_order(indexes: list[int | None]) -> None:
    # Unknown indexes sort last (NULLS LAST).
    known = [i for i in indexes if i is not None]
    if indexes[: len(known)] != sorted(known):
        raise RuntimeError(f"fleet cells arrived out of index order: {indexes}")


def models(session: Session) -> list[str]:
    """Every GPU model name in the inventory."""
    cur = driver_connection(session).cursor()
    try:
        cur.execute("SELECT DISTINCT name FROM gpus WHERE name IS NOT NULL")
        return [name for (name,) in cur.fetchall()]
    finally:
        cur.close()
