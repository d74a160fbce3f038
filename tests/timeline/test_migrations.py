"""Alembic makes the schema: upgrade from empty, downgrade to base and up again, per backend."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from timeline import db
from timeline.tables import metadata


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_upgrade_downgrade_upgrade_round_trip(
    backend: str, request: pytest.FixtureRequest, tmp_path: object
) -> None:
    if backend == "postgres":
        base = request.getfixturevalue("pg_database_url")
        # A database of its own so the round trip cannot disturb other tests' schema.
        url = _fresh_pg_database(base)
    else:
        url = f"sqlite:///{tmp_path}/migrate.db"
    db.upgrade(url)
    engine = db.make_engine(url)
    assert set(metadata.tables) <= set(inspect(engine).get_table_names())
    db.downgrade(url, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    db.upgrade(url)
    assert set(metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def _fresh_pg_database(base_url: str) -> str:
    import uuid

    from sqlalchemy import text

    name = f"fm_migrate_{uuid.uuid4().hex[:8]}"
    admin = db.make_engine(base_url, isolation_level="AUTOCOMMIT", pool_size=1)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base_url.rsplit("/", 1)[0] + f"/{name}"


def test_migrations_at_head_match_the_table_definitions(migrated_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = db.make_engine(migrated_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()
    assert diff == [], f"tables and migrations differ; write a migration: {diff}"
