"""The ingest keeps node_cells as a rebuild from the inventory and gpu_latest would make it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from timeline import node_cells, service
from timeline.models import Batch, GpuInfo, Sample

ON_POSTGRES = pytest.mark.parametrize("migrated_url", ["postgres"], indirect=True)
NOW = float(int(time.time()) - 60)  # whole seconds: ms times are exact


def _batch(node: str, bid: str, *, gpus: list[GpuInfo] = (), samples: list[Sample] = ()) -> Batch:  # type: ignore[assignment]
    return Batch(agent="a", node=node, batch_id=f"batch-{bid}", gpus=list(gpus),
                 samples=list(samples))  # fmt: skip


def _cells(session: Session) -> dict[str, tuple[Any, ...]]:
    found = session.execute(text(
        "SELECT node, idx, ut, utils, ts_ms, ts_min_ms, uuids, pcis FROM node_cells"
    )).all()  # fmt: skip
    return {row[0]: tuple(row[1:]) for row in found}


def _kept_equals_rebuilt(session: Session) -> dict[str, tuple[Any, ...]]:
    kept = _cells(session)
    node_cells.rebuild(session)
    assert kept == _cells(session)
    return kept


def _gpu(uuid: str, node: str, index: int) -> GpuInfo:
    return GpuInfo(uuid=uuid, node=node, index=index, pci_bus_id=f"0000:{0x18 + index:02x}:00.0")


@ON_POSTGRES
def test_ingest_rewrites_the_cells_of_the_nodes_a_batch_touches_even_when_a_gpu_moves(
    session: Session,
) -> None:
    service.append_batch(session, batch=_batch(
        "n1", "0001", gpus=[_gpu("GPU-b", "n1", 1), _gpu("GPU-a", "n1", 0)],
        samples=[Sample(ts=NOW, gpu_uuid="GPU-a", util_gpu=50.4)],
    ))  # fmt: skip
    cells = _kept_equals_rebuilt(session)
    # Index order; GPU-b has no sample yet, so the node has no oldest time.
    assert cells == {"n1": ("0,1", "[50,-1]", [pytest.approx(50.4), None],
                            [int(NOW * 1000), None], None, ["GPU-a", "GPU-b"],
                            ["0000:18:00.0", "0000:19:00.0"])}  # fmt: skip
    # A batch of samples only, as an agent sends every poll.
    service.append_batch(session, batch=_batch("n1", "0002", samples=[
        Sample(ts=NOW + 10, gpu_uuid="GPU-a", util_gpu=0.0),
        Sample(ts=NOW + 5, gpu_uuid="GPU-b", util_gpu=99.0),
    ]))  # fmt: skip
    cells = _kept_equals_rebuilt(session)
    assert cells["n1"][1:3] == ("[0,99]", [0.0, 99.0])
    assert cells["n1"][4] == int((NOW + 5) * 1000)
    # GPU-b moves to n2 (and n2's other GPU has no sample): both nodes' rows change.
    service.append_batch(session, batch=_batch(
        "n2", "0003", gpus=[_gpu("GPU-b", "n2", 0), _gpu("GPU-c", "n2", 1)]
    ))  # fmt: skip
    cells = _kept_equals_rebuilt(session)
    assert cells["n1"][5] == ["GPU-a"] and cells["n2"][5] == ["GPU-b", "GPU-c"]
    assert cells["n2"][1] == "[99,-1]"
    # n1's last GPU leaves it: n1 keeps no row.
    service.append_batch(session, batch=_batch("n3", "0004", gpus=[_gpu("GPU-a", "n3", 0)]))
    assert set(_kept_equals_rebuilt(session)) == {"n2", "n3"}


@ON_POSTGRES
def test_two_batches_touching_one_node_at_once_both_reach_its_cell(
    session: Session, session_factory: sessionmaker[Session]
) -> None:
    gpus = [_gpu("GPU-a", "n1", 0), _gpu("GPU-b", "n1", 1)]
    old = [Sample(ts=NOW - 10, gpu_uuid=g.uuid, util_gpu=1.0) for g in gpus]
    service.append_batch(session, batch=_batch("n1", "0001", gpus=gpus, samples=old))
    session.commit()
    first = session_factory()
    service.append_batch(first, batch=_batch(
        "n1", "0002", samples=[Sample(ts=NOW, gpu_uuid="GPU-a", util_gpu=60.0)]
    ))  # fmt: skip
    errors: list[BaseException] = []

    def second() -> None:
        try:
            with session_factory() as s:
                # Another sender (its own nodes row, so the batches share no other lock).
                service.append_batch(s, batch=_batch(
                    "relay", "0003", samples=[Sample(ts=NOW, gpu_uuid="GPU-b", util_gpu=70.0)]
                ))  # fmt: skip
                s.commit()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=second)
    thread.start()
    thread.join(1.0)
    assert thread.is_alive()  # it waits for the first batch's lock on n1
    first.commit()
    first.close()
    thread.join(30)
    assert errors == [] and not thread.is_alive()
    # The second read the first's sample after it committed: neither value was lost.
    assert _cells(session)["n1"][2] == [60.0, 70.0]


@ON_POSTGRES
def test_a_refresh_of_nothing_or_of_a_node_without_gpus_writes_nothing(session: Session) -> None:
    node_cells.refresh(session, nodes=[])
    node_cells.refresh(session, nodes=["no-such-node"])
    assert _cells(session) == {}


@ON_POSTGRES
def test_a_bulk_write_of_more_nodes_than_per_node_locks_allow_still_keeps_every_cell(
    session: Session,
) -> None:
    # 900 one-GPU nodes, their newest samples written by hand in three statements of one
    # transaction: past 512 nodes the trigger locks the table instead of each node.
    count = 900
    every = "FROM generate_series(1, CAST(:n AS INT)) k"
    session.execute(
        text(f"INSERT INTO gpu_ids (id, uuid, node) SELECT k, 'GPU-' || k, 'n' || k {every}"),
        {"n": count},
    )
    session.execute(
        text(f"INSERT INTO gpus (uuid, node, gpu_id) SELECT 'GPU-' || k, 'n' || k, k {every}"),
        {"n": count},
    )
    for first in range(1, count, 300):
        session.execute(text(
            "INSERT INTO gpu_latest (gpu_id, ts_ms, util_gpu) "
            "SELECT k, 1000 * k, k % 100 FROM generate_series(CAST(:a AS INT), CAST(:b AS INT)) k"
        ), {"a": first, "b": first + 299})  # fmt: skip
    held = session.execute(text(
        "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'"
    )).scalar_one()  # fmt: skip
    assert held <= 512
    cells = _kept_equals_rebuilt(session)
    assert len(cells) == count and cells["n7"][1] == "[7]" and cells["n7"][0] == ""


def test_node_cells_are_kept_only_on_postgresql_with_samples_in_sql(session: Session) -> None:
    dialect = session.get_bind().dialect.name
    assert node_cells.kept(session) is (dialect == "postgresql")
