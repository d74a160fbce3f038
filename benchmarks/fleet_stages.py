"""The fleet page's work, stage by stage, for `bench dashboard` (medians over n runs, in ms).

The page's cost is: the newest sample per GPU (`latest`, the telemetry read), who holds which
GPU (`holders`), the nodes, the failing set, classifying every GPU, building and serializing the
grid, and the filter options. Timing them apart shows which part grows with what.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from correlator import service as incidents
from timeline import fleet, fleet_cells, fleet_read, history
from web.fleetgrid import build_grid, grid_from_cells, options_from_cells
from web.fleetstate import filter_options

T = TypeVar("T")


def _median_ms(fn: Callable[[], T], n: int) -> tuple[float, T]:
    times, value = [], fn()  # once to warm
    for _ in range(n):
        started = time.perf_counter()
        value = fn()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1), value


def fleet_stages(factory: sessionmaker[Session], *, now: float, n: int) -> dict[str, Any]:
    """Median ms of each stage of the fleet page, keys `fleet_stage_<stage>_ms`."""
    out: dict[str, Any] = {}
    with factory() as s, fleet.bulk_allocation():  # as fleet.read_inputs reads them
        out["latest"], latest = _median_ms(lambda: fleet.read_latest(s), n)
        out["holders"], holders = _median_ms(lambda: fleet_read.holders_at(s, at=now), n)
        out["nodes"], nodes = _median_ms(lambda: history.node_states(s), n)
        out["failing"], failing = _median_ms(lambda: incidents.failing_set(s), n)
    inputs = fleet.FleetInputs(latest, holders, nodes)
    out["classify"], rows = _median_ms(
        lambda: fleet.classify_inputs(inputs, now=now, failing=failing), n
    )
    out["grid"], _ = _median_ms(lambda: build_grid(*rows).script_json(), n)
    out["options"], _ = _median_ms(lambda: filter_options(rows[1]), n)
    if factory.kw["bind"].dialect.name == "postgresql":  # what the page does there instead
        out |= _cell_stages(factory, now=now, failing=failing, n=n)
    result = {f"fleet_stage_{k}_ms": v for k, v in out.items()}
    result["fleet_stages_except_latest_ms"] = round(
        sum(v for k, v in out.items() if k != "latest" and not k.startswith("cells")), 1
    )
    return result


def _cell_stages(
    factory: sessionmaker[Session], *, now: float, failing: Any, n: int
) -> dict[str, float]:
    out: dict[str, float] = {}
    with factory() as s:

        def read() -> Any:
            found = fleet_cells.node_cells(
                s,
                now=now,
                failing=failing,
                idle_threshold=5.0,
                stale_after_s=fleet.STALE_AFTER_S,
                side=factory,  # holders on a second connection meanwhile, as the page reads
            )
            s.rollback()  # SET LOCAL work_mem ends with the transaction, as in a request
            return found

        out["cells_read"], (cells, jobs, _) = _median_ms(read, n)
        out["cells_models"], models = _median_ms(lambda: fleet_cells.models(s), n)
    out["cells_grid"], _ = _median_ms(lambda: grid_from_cells(cells, jobs).script_json(), n)
    out["cells_options"], _ = _median_ms(lambda: options_from_cells(jobs, models), n)
    return out
