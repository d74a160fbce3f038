"""Alembic 0002 adds the correlator's tables on SQLite and PostgreSQL and removes only them."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from timeline import db

MINE = {"incidents", "idle_findings", "gpu_power_profiles", "correlator_state"}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_0002_upgrades_and_downgrades_only_the_correlator_tables(
    backend: str, request: pytest.FixtureRequest
) -> None:
    pg_url = request.getfixturevalue("pg_database_url") if backend == "postgres" else ""
    with db.scratch_database(backend, pg_url=pg_url, prefix="fm_corr") as url:
        _check_0002(url)


def _check_0002(url: str) -> None:
    db.upgrade(url, "0001")
    engine = db.make_engine(url)
    before = set(inspect(engine).get_table_names())
    db.upgrade(url, "0002")
    after = set(inspect(engine).get_table_names())
    assert after - before == MINE
    index_names = {i["name"] for i in inspect(engine).get_indexes("incidents")}
    assert "uq_incidents_open_fingerprint" in index_names
    db.downgrade(url, "0001")
    assert set(inspect(engine).get_table_names()) == before
    db.upgrade(url, "0002")
    assert set(inspect(engine).get_table_names()) >= MINE
    engine.dispose()
