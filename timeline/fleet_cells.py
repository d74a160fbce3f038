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

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, NamedTuple

from sqlalchemy.orm import Session, sessionmaker

from timeline import db
from timeline.db import driver_connection
from timeline.fleet import (
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
    utils: str  # the GPUs' utilizations as a JSON array, -1 where unknown (as the grid sends)
    job: int | None  # where one job holds every GPU: its row in `jobs` (its id)
    jobs: list[int | None] | None  # else each GPU's holder (None where free); None if none
    indexes: list[int | None]  # shared between nodes with the same: never change one


class JobRow(NamedTuple):
    """What the grid and its filters show of a job that holds GPUs."""

    job_id: str
    user: str | None
    account: str | None
    partition: str | None


def _letter(state: GpuState) -> str:
    return f"'{STATE_LETTERS[state]}'"


# Ordered aggregates in PostgreSQL 15 sort every group once per aggregate; instead the rows
# arrive sorted from the inner query and a GroupAggregate keeps that order (PostgreSQL's
# documented "sorted subquery" form). `indexes` lets the reader check the order per node.
# Who holds which GPU is not joined here (a 100k-row join cost a third of the statement):
# HOLDERS_SQL reads it per node and Python lays it over the GPUs (free -> allocated-but-idle).
# A node's group and drain state are its generated columns (revision 0014: node_group's and
# the drain rule, computed when the node is written, not per view); none without a node row.
SQL = f"""
SELECT c.node, COALESCE(n.grid_group, 'all'), COALESCE(n.drained_by, 0), c.st, c.ut, c.idx
FROM (
  SELECT node, string_agg(st, '') AS st, '[' || string_agg(CAST(ut AS TEXT), ',') || ']' AS ut,
    string_agg(COALESCE(CAST(idx AS TEXT), ''), ',') AS idx
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
LEFT JOIN nodes n ON n.name = c.node
ORDER BY c.node -- in the "C" collation: UTF-8 byte order, which is how Python orders str
"""

# history.holders_at's rows, one per GPU (or per node: index -1, the whole node): where two
# claim the same, the newest wins, as in fleet.classify_inputs (holders oldest first, the
# last kept). Sorted by bytes ("C"): the same groups as the default collation, for less; and
# grouped in that collation too, so the sorted rows aggregate as they come (a hash aggregate
# kept 8 kB per node's arrays and spilled to disk at 8.75k nodes).
HOLDERS_SQL = f"""
SELECT node, string_agg(CAST(gi AS TEXT), ','), CASE WHEN min(id) = max(id) THEN min(id) END,
  CASE WHEN min(id) <> max(id) THEN string_agg(CAST(id AS TEXT), ',') END
FROM (
  SELECT DISTINCT ON (1, gi) a.node COLLATE "C" AS node,
    CASE WHEN a.gpu_index < 0 THEN -1 ELSE a.gpu_index END AS gi, j.id
  {open_allocations_sql("%(now)s")}
  ORDER BY 1, gi, a.start_ts DESC, j.id DESC
) held GROUP BY node
"""

_FREE, _IDLE = STATE_LETTERS[GpuState.FREE], STATE_LETTERS[GpuState.IDLE_ALLOCATED]
# HOLDERS_SQL's row of a node: its held GPU indexes ("0,1,...", -1: all), their one holder's
# id where one job holds them all, else each one's ("7,7,9"). Text, not arrays: 12.5k nodes'
# lists were most of the objects each cyclic garbage collection walked.
Held = tuple[str, str, int | None, str | None]
# One text parameter: psycopg's dumping of a list of 10k ints cost more than the query.
JOBS_SQL = (
    'SELECT id, job_id, "user", account, partition FROM jobs '
    "WHERE id = ANY(CAST(string_to_array(%s, ',') AS BIGINT[]))"
)
# The distinct models by skipping through ix_gpus_name from one name to the next (a handful of
# index probes; DISTINCT scanned the whole inventory: 15-35 ms at 100k GPUs).
MODELS_SQL = """
WITH RECURSIVE m(name) AS (
  (SELECT name FROM gpus WHERE name IS NOT NULL ORDER BY name LIMIT 1)
  UNION ALL
  SELECT (SELECT g.name FROM gpus g WHERE g.name > m.name ORDER BY g.name LIMIT 1)
  FROM m WHERE m.name IS NOT NULL
) SELECT name FROM m WHERE name IS NOT NULL
"""


class FleetCells(NamedTuple):
    """The classified fleet: its nodes by name, the jobs holding their GPUs, the models."""

    cells: list[NodeCells]
    jobs: dict[int, JobRow]  # by row id
    models: list[str]


class _Holders(NamedTuple):
    by_node: dict[str, Held]  # keyed by node
    jobs: dict[int, JobRow]  # every holder's job, by row id
    models: list[str]


def _hold(
    states: str, indexes: list[int | None], index_text: str, held: Held | None
) -> tuple[str, int | None, list[int | None] | None]:
    """A node's letters, its one holder or each GPU's, from its holders: a GPU's own
    allocation first, else the whole node's (fleet.classify_inputs' rule)."""
    if held is None:
        return states, None, None
    _, gis_text, one, ids_text = held
    # The common forms first: one job on every GPU by index, or on the whole node.
    if one is not None and (gis_text == index_text or gis_text == "-1"):
        return states.replace(_FREE, _IDLE), one, None
    gis = [int(i) for i in gis_text.split(",")]
    ids = [one] * len(gis) if ids_text is None else [int(i) for i in ids_text.split(",")]
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
    side: sessionmaker[Session] | None = None,
) -> FleetCells:
    """Every node that has GPUs, classified as fleet.classify_inputs would (PostgreSQL only),
    ordered by name as Python orders strings; the jobs that hold their GPUs; the models.

    With `side`, who holds what is read on a second connection while `session` classifies:
    the two statements run on two server processes at once (on 2 cores the page's read took
    a median 342 ms against 511 ms one after the other, at 100k GPUs)."""
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
        if side is None:
            with _cursor(session) as cur:
                return _merge(_classified(cur, params), _holders(cur, params))
        with ThreadPoolExecutor(1, thread_name_prefix="fleet-holders") as pool:
            holders = pool.submit(_holders_on, side, params)
            with _cursor(session) as cur:
                rows = _classified(cur, params)
            return _merge(rows, holders.result())


@contextmanager
def _cursor(session: Session) -> Iterator[Any]:
    cur = driver_connection(session).cursor(binary=True)
    try:
        # The sorts and hashes of 100k rows spill to disk under the default 4 MB.
        cur.execute("SET LOCAL work_mem = '64MB'")
        yield cur
    finally:
        cur.close()


def _classified(cur: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    cur.execute(SQL, params)
    rows: list[tuple[Any, ...]] = cur.fetchall()
    return rows


def _holders(cur: Any, params: dict[str, Any]) -> _Holders:
    cur.execute(HOLDERS_SQL, params)
    by_node: dict[str, Held] = {row[0]: row for row in cur.fetchall()}
    ids = {str(one) for _, _, one, _ in by_node.values() if one is not None}
    ids.update(i for _, _, _, many in by_node.values() if many for i in many.split(","))
    cur.execute(JOBS_SQL, (",".join(ids),))
    jobs = {row[0]: JobRow(*row[1:]) for row in cur.fetchall()}
    cur.execute(MODELS_SQL)
    return _Holders(by_node, jobs, [name for (name,) in cur.fetchall()])


def _holders_on(side: sessionmaker[Session], params: dict[str, Any]) -> _Holders:
    with db.reading(side) as session, _cursor(session) as cur:
        return _holders(cur, params)


def _merge(rows: list[tuple[Any, ...]], holders: _Holders) -> FleetCells:
    out: list[NodeCells] = []
    held: set[int | None] = set()
    held_by = holders.by_node
    known: dict[str, list[int | None]] = {}  # index texts ("0,1,2,3") as lists, one per text
    cell = NodeCells._make
    # Hot loop, once per node (12.5k at 100k GPUs).
    for node, group, drained, states, utils, index_text in rows:
        indexes = known.get(index_text)
        if indexes is None:
            indexes = known[index_text] = [
                None if i == "" else int(i) for i in index_text.split(",")
            ]
            # The sorted-subquery form is documented to hold for a plain GroupAggregate; if a
            # plan ever reordered rows, fail loudly rather than draw GPUs in the wrong places.
            _check_order(indexes)
        states, job, jobs = _hold(states, indexes, index_text, held_by.get(node))
        if jobs is None:
            held.add(job)
        else:
            held.update(jobs)
        out.append(cell((node, group, drained, states, utils, job, jobs, indexes)))
    # Only the jobs on inventory GPUs: the filters offer what the grid shows.
    on_grid = {i: row for i, row in holders.jobs.items() if i in held}
    return FleetCells(out, on_grid, holders.models)


def _check_order(indexes: list[int | None]) -> None:
    # Unknown indexes sort last (NULLS LAST).
    known = [i for i in indexes if i is not None]
    if indexes[: len(known)] != sorted(known):
        raise RuntimeError(f"fleet cells arrived out of index order: {indexes}")


def models(session: Session) -> list[str]:
    """Every GPU model name in the inventory."""
    cur = driver_connection(session).cursor()
    try:
        cur.execute(MODELS_SQL)
        return [name for (name,) in cur.fetchall()]
    finally:
        cur.close()
