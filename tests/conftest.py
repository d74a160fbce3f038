"""Shared fixtures: a migrated database per backend (SQLite file, real PostgreSQL)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

import correlator.tables  # noqa: F401  (registers the correlator's tables on metadata)
import healer.tables  # noqa: F401  (registers the healer's tables on metadata)
import timeline.deliveries  # noqa: F401  (registers the notifications table)
from tests.helpers.vm import on_vm, vm_store, vm_url  # noqa: F401  (VictoriaMetrics fixtures)
from timeline import db, gpu_id_cache
from timeline.tables import metadata


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A CLI test configures logging onto pytest's captured stderr, closed once the test ends;
    later threads logging there print 'I/O operation on closed file' tracebacks."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


# Property tests keep no example database in the work tree and have no per-example deadline
# (several engineers share two cores: timings are noise here).
hypothesis_settings.register_profile("fleetmedic", database=None, deadline=None)
hypothesis_settings.load_profile("fleetmedic")

PG_ADMIN_URL = os.environ.get(
    "FLEETMEDIC_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _require(flag: str) -> bool:
    return os.environ.get(flag, "") == "1"


def missing(flag: str, reason: str) -> NoReturn:
    """A real service or tool is not here: fail where `flag`=1 (CI), else skip loudly."""
    if _require(flag):
        pytest.fail(f"{flag}=1 but {reason}")
    pytest.skip(f"SKIPPED ({reason})")


def pg_available() -> str | None:
    """None when PostgreSQL answers, else the reason it does not."""
    try:
        engine = db.make_engine(PG_ADMIN_URL, pool_size=1)
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
        return None
    except Exception as exc:  # any failure to connect means "not here"
        return f"PostgreSQL not reachable at {PG_ADMIN_URL}: {exc.__class__.__name__}"


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run, dropped at the end."""
    reason = pg_available()
    if reason:
        if _require("REQUIRE_POSTGRES"):
            pytest.fail(f"REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(f"SKIPPED (no PostgreSQL): {reason}")
    with db.scratch_database("postgres", pg_url=PG_ADMIN_URL, prefix="fleetmedic_test") as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An SQLite file for this test run."""
    return f"sqlite:///{tmp_path_factory.mktemp('db') / 'fleetmedic.db'}"


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def migrated_url(request: pytest.FixtureRequest) -> str:
    """A database URL migrated to head, once per backend per run."""
    if request.param == "postgres":
        url = request.getfixturevalue("pg_database_url")
    else:
        url = request.getfixturevalue("sqlite_database_url")
    db.upgrade(url)
    return str(url)


@pytest.fixture(scope="session")
def _engines() -> Iterator[dict[str, Engine]]:
    cache: dict[str, Engine] = {}
    yield cache
    for engine in cache.values():
        engine.dispose()


@pytest.fixture()
def engine(migrated_url: str, _engines: dict[str, Engine]) -> Iterator[Engine]:
    """An engine on a migrated database, emptied after each test."""
    eng = _engines.get(migrated_url)
    if eng is None:
        eng = _engines[migrated_url] = db.make_engine(migrated_url)
    yield eng
    with eng.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            conn.execute(table.delete())
    gpu_id_cache.forget_all()  # gpu_ids emptied: ids the process remembers are wrong now


@pytest.fixture()
def session_factory(engine: Engine) -> sessionmaker[Session]:
    """A session factory bound to the test database."""
    return db.make_sessionmaker(engine)


@pytest.fixture()
def session(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session; the test commits when it means to."""
    s = session_factory()
    yield s
    s.rollback()
    s.close()


@pytest.fixture
def sqlite_factory(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """A fresh migrated SQLite store of the test's own, for tests that need SQLite itself
    (its whole-database write lock; the live Slurm tests, run once, not per backend)."""
    url = f"sqlite:///{tmp_path / 'own.db'}"
    db.upgrade(url)
    engine = db.make_engine(url)
    yield db.make_sessionmaker(engine)
    engine.dispose()
