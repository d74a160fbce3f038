"""Revision 0009 moves wide sample rows into compact ones and back, on both backends."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import Engine, text

from timeline import db

NOW = float(int(time.time()) - 3600) + 0.25  # recent: it lands in a day partition on PostgreSQL

KEYS = ("ts", "node", "uuid", "util", "power", "energy", "sbe", "pending", "extra")
WIDE = [
    (NOW, "n1", "GPU-a", 90.0, 525.4, 1.5e12, 3, True, '{"sm_active": 0.5}'),
    (NOW + 10, "n1", "GPU-a", 91.0, 530.0, 1.6e12, 4, False, None),
    (NOW + 5, "n2", "GPU-b", None, 70.25, None, None, None, None),
    (100.0, "n2", "GPU-b", 1.0, 60.0, None, None, None, None),  # 1970: the DEFAULT partition
]


def _insert_wide(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO samples (ts, node, gpu_uuid, util_gpu, power_w, energy_mj, "
                "ecc_sbe_volatile, remap_pending, extra) "
                "VALUES (:ts, :node, :uuid, :util, :power, :energy, :sbe, :pending, :extra)"
            ),
            [dict(zip(KEYS, row, strict=True)) for row in WIDE],
        )


def _wide_rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT ts, node, gpu_uuid, util_gpu, power_w, energy_mj, ecc_sbe_volatile, "
                "remap_pending FROM samples ORDER BY gpu_uuid, ts"
            )
        ).all()
    return [tuple(r) for r in rows]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_upgrade_moves_wide_rows_into_compact_ones_and_downgrade_moves_them_back(
    backend: str, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("pg_database_url") if backend == "postgres" else ""
    with db.scratch_database(backend, pg_url=pg_url, prefix="fm_compact") as url:
        db.upgrade(url, "0006")
        engine = db.make_engine(url)
        _insert_wide(engine)
        before = _wide_rows(engine)
        db.upgrade(url, "0009")
        with engine.connect() as conn:
            ids = dict(conn.execute(text("SELECT uuid, id FROM gpu_ids")).all())
            assert set(ids) == {"GPU-a", "GPU-b"}
            compact = conn.execute(
                text("SELECT gpu_id, ts_ms, util_gpu, power_w FROM samples ORDER BY gpu_id, ts_ms")
            ).all()
            latest = dict(conn.execute(text("SELECT gpu_id, ts_ms FROM gpu_latest")).all())
        assert len(compact) == 4
        assert (ids["GPU-a"], round((NOW + 10) * 1000), 91.0, 530.0) in compact
        assert latest == {
            ids["GPU-a"]: round((NOW + 10) * 1000),
            ids["GPU-b"]: round((NOW + 5) * 1000),
        }
        db.downgrade(url, "0006")
        after = _wide_rows(engine)
        engine.dispose()
    assert after == before
