"""Alembic makes the schema: upgrade from empty, downgrade to base and up again, per backend."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from timeline import db
from timeline.tables import metadata


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_upgrade_downgrade_upgrade_round_trip(backend: str, request: pytest.FixtureRequest) -> None:
    # A database of its own so the round trip cannot disturb other tests' schema.
    pg_url = request.getfixturevalue("pg_database_url") if backend == "postgres" else ""
    with db.scratch_database(backend, pg_url=pg_url, prefix="fm_migrate") as url:
        _round_trip(url)


def _round_trip(url: str) -> None:
    db.upgrade(url)
    engine = db.make_engine(url)
    assert set(metadata.tables) <= set(inspect(engine).get_table_names())
    db.downgrade(url, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    db.upgrade(url)
    assert set(metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_migrations_at_head_match_the_table_definitions(migrated_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from timeline.partitions import include_object

    engine = db.make_engine(migrated_url)
    with engine.connect() as conn:
        # The same filter as alembic/env.py: PostgreSQL lists samples' day partitions as tables.
        context = MigrationContext.configure(conn, opts={"include_object": include_object})
        diff = compare_metadata(context, metadata)
    engine.dispose()
    assert diff == [], f"tables and migrations differ; write a migration: {diff}"


def test_gpu_latest_leaves_room_on_its_pages_for_hot_updates_on_postgresql(
    request: pytest.FixtureRequest,
) -> None:
    from sqlalchemy import text

    pg_url = request.getfixturevalue("pg_database_url")
    with db.scratch_database("postgres", pg_url=pg_url, prefix="fm_fill") as url:
        engine = db.make_engine(url)

        def options() -> list[str] | None:
            with engine.connect() as conn:
                q = "SELECT reloptions FROM pg_class WHERE relname = 'gpu_latest'"
                return conn.execute(text(q)).scalar_one()  # type: ignore[no-any-return]

        db.upgrade(url)
        assert options() == ["fillfactor=20"]
        db.downgrade(url, "0010")
        assert options() == ["fillfactor=50"]
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_revision_0012_gives_every_inventory_gpu_its_gpu_ids_id(
    backend: str, request: pytest.FixtureRequest
) -> None:
    from sqlalchemy import text

    pg_url = request.getfixturevalue("pg_database_url") if backend == "postgres" else ""
    with db.scratch_database(backend, pg_url=pg_url, prefix="fm_gpu_id") as url:
        db.upgrade(url, "0011")
        engine = db.make_engine(url)
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO gpu_ids (uuid, node) VALUES ('GPU-s', 'n1')"))
            conn.execute(text(
                "INSERT INTO gpus (uuid, node, \"index\") VALUES ('GPU-s', 'n1', 0), "
                "('GPU-never-sampled', 'n2', 0)"
            ))  # fmt: skip
        db.upgrade(url, "0012")
        with engine.connect() as conn:
            ids = dict(conn.execute(text("SELECT uuid, id FROM gpu_ids")).all())
            inventory = dict(conn.execute(text("SELECT uuid, gpu_id FROM gpus")).all())
            nodes = dict(conn.execute(text("SELECT uuid, node FROM gpu_ids")).all())
        assert set(ids) == {"GPU-s", "GPU-never-sampled"}
        assert inventory == ids and nodes["GPU-never-sampled"] == "n2"
        db.downgrade(url, "0011")
        with engine.connect() as conn:
            assert "gpu_id" not in [c["name"] for c in inspect(conn).get_columns("gpus")]
        engine.dispose()
