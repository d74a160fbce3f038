"""Waiting for the database before migrating (the Helm hook job starts with its database)."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool
from typer.testing import CliRunner

from tests.conftest import PG_ADMIN_URL
from timeline import db
from web.cli import app


def test_gives_up_with_the_database_error_after_the_timeout() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    started = time.monotonic()
    with pytest.raises(DBAPIError):
        db.wait_for_database(f"postgresql+psycopg://nobody@127.0.0.1:{port}/x", timeout_s=1.5)
    assert 1.5 <= time.monotonic() - started < 10


@pytest.mark.postgres
@pytest.mark.integration
def test_db_upgrade_waits_for_a_database_that_appears_later(pg_database_url: str) -> None:
    del pg_database_url  # requested for its skip-or-fail check of PostgreSQL only
    name = f"fm_late_{uuid.uuid4().hex[:8]}"
    url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    admin = db.make_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=NullPool)

    def create_later() -> None:
        time.sleep(1.5)
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))

    creator = threading.Thread(target=create_later)
    creator.start()
    try:
        result = CliRunner().invoke(
            app, ["db", "upgrade", "--wait", "30", "--database-url", url], catch_exceptions=False
        )
        creator.join()
        assert result.exit_code == 0, result.output
        engine = db.make_engine(url, poolclass=NullPool)
        assert "leases" in inspect(engine).get_table_names()
        engine.dispose()
    finally:
        creator.join()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
