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
)


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
    # node_group's rule: the first of GROUP_LABELS whose value is a non-empty string.
    arms = []
    for key in GROUP_LABELS:
        value = f"n.labels -> '{key}'"
        short = key.rsplit("/", 1)[-1]
        arms.append(
            f"WHEN json_typeof({value}) = 'string' AND n.labels ->> '{key}' <> '' "
            f"THEN '{short}=' || (n.labels ->> '{key}')"
        )
    return f"CASE {' '.join(arms)} ELSE 'all' END"


def _holders(where: str, per_gpu: bool) -> str:
    # history.holders_at's rows, one per GPU (or per node for whole-node allocations): where
    # two claim the same, the newest wins, as in fleet.classify_inputs (holders oldest first).
    # Sorted by bytes ("C"): the same groups as the default collation, at a fraction of the cost.
    key = 'a.node COLLATE "C", a.gpu_index' if per_gpu else 'a.node COLLATE "C"'
    return (
        f"SELECT DISTINCT ON ({key}) a.node, a.gpu_index, j.id FROM allocations a "
        "JOIN jobs j ON a.job_id = j.job_id AND a.scheduler = j.scheduler "
        f"WHERE {where} AND a.start_ts <= %(now)s AND (a.end_ts IS NULL OR a.end_ts > %(now)s) "
        f"ORDER BY {key}, a.start_ts DESC, j.id DESC"
    )


# Ordered aggregates in PostgreSQL 15 sort every group once per aggregate; instead the rows
# arrive sorted from the inner query and a GroupAggregate keeps that order (PostgreSQL's
# documented "sorted subquery" form). `indexes` lets the reader check the order per node.
# Holders travel as job row ids (integers): arrays of text cost more to fetch than the query.
SQL = f"""
WITH held AS ({_holders("a.gpu_index >= 0", per_gpu=True)}),
whole AS ({_holders("a.gpu_index < 0", per_gpu=False)}),
cells AS (
  SELECT g.node COLLATE "C" AS node, g."index" AS idx,
    CASE WHEN g.uuid = ANY(%(bad_gpus)s) OR g.node = ANY(%(bad_nodes)s)
              OR (g.pci_bus_id = ANY(%(bad_pcis)s)
                  AND g.node || '|' || g.pci_bus_id = ANY(%(bad_gpus)s))
           THEN {_letter(GpuState.FAILING)}
         WHEN l.ts_ms IS NULL
              OR %(now)s - CAST(l.ts_ms AS DOUBLE PRECISION) / 1000 > %(stale)s
           THEN {_letter(GpuState.STALE)}
         WHEN COALESCE(l.util_gpu, 0) > %(idle)s THEN {_letter(GpuState.BUSY)}
         WHEN COALESCE(p.id, w.id) IS NULL THEN {_letter(GpuState.FREE)}
         ELSE {_letter(GpuState.IDLE_ALLOCATED)} END AS st,
    CASE WHEN l.util_gpu IS NULL THEN -1 ELSE CAST(round(l.util_gpu) AS INTEGER) END AS ut,
    COALESCE(p.id, w.id) AS job
  FROM gpus g
  -- The inventory's own id (revision 0012); gpu_ids by uuid only where it has none.
  LEFT JOIN gpu_latest l
    ON l.gpu_id = COALESCE(g.gpu_id, (SELECT i.id FROM gpu_ids i WHERE i.uuid = g.uuid))
  LEFT JOIN held p ON p.node = g.node AND p.gpu_index = g."index"
  LEFT JOIN whole w ON w.node = g.node
  ORDER BY 1, 2, g.uuid
)
SELECT c.node, {_group_sql()},
  CASE WHEN n.state ~* '{"|".join(DRAIN_WORDS)}'
       THEN CASE WHEN starts_with(n.reason, '{OUR_DRAIN_PREFIX}') THEN 2 ELSE 1 END
       ELSE 0 END,
  c.st, c.ut, CASE WHEN c.one THEN c.job END, CASE WHEN NOT c.one THEN c.jobs END, c.idx
FROM (SELECT node, string_agg(st, '') AS st, array_agg(ut) AS ut, array_agg(idx) AS idx,
        count(job) = 0 OR (count(job) = count(*) AND min(job) = max(job)) AS one,
        min(job) AS job, array_agg(job) AS jobs
      FROM cells GROUP BY node) c
LEFT JOIN nodes n ON n.name = c.node
ORDER BY c.node -- in the "C" collation: UTF-8 byte order, which is how Python orders str
"""


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
        # Every non-empty part after a "|" of those keys ("node|pci bus id"; an empty bus id
        # never matches): a cheap test before the concatenation, else built for 100k GPUs.
        "bad_pcis": sorted(
            {k[i + 1 :] for k in failing.gpus for i, c in enumerate(k) if c == "|"} - {""}
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
        cur.execute(SQL, params)
        out = list(map(NodeCells._make, cur.fetchall()))
        held: set[int | None] = set()
        for cells in out:
            indexes = cells.indexes
            # The sorted-subquery form is documented to hold for a plain GroupAggregate; if a
            # plan ever reordered rows, fail loudly rather than draw GPUs in the wrong places.
            if None in indexes or indexes != sorted(indexes):  # type: ignore[type-var]
                _check_order(indexes)
            if cells.jobs is None:
                held.add(cells.job)
            else:
                held.update(cells.jobs)
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
