"""Alembic 0002 adds the correlator's tables on SQLite and PostgreSQL and removes only them."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import inspect, text

from timeline import db

MINE = {"incidents", "idle_findings", "gpu_power_profiles", "correlator_state"}


def _fresh_pg(base_url: str) -> str:
    name = f"fm_corr_{uuid.uuid4().hex[:8]}"
    admin = db.make_engine(base_url, isolation_level="AUTOCOMMIT", pool_size=1)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_0002_upgrades_and_downgrades_only_the_correlator_tables(
    backend: str, request: pytest.FixtureRequest, tmp_path: object
) -> None:
    if backend == "postgres":
        url = _fresh_pg(request.getfixturevalue("pg_database_url"))
    else:
        url = f"sqlite:///{tmp_path}/m2.db"
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
