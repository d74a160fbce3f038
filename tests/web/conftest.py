"""An app per test on the migrated database of each backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from timeline.settings import Settings
from web.app import create_app

AGENT_TOKEN = "agent-secret-token"


@pytest.fixture()
def settings(migrated_url: str, engine: Engine, tmp_path: Path) -> Settings:
    """Settings on the test database with one agent token and a data dir of its own."""
    return Settings(
        database_url=migrated_url,
        agent_tokens=[AGENT_TOKEN],
        page_refresh_s=0,
        fleet_cache_s=0,  # tests change the fleet between reads: no reuse
        data_dir=tmp_path,
    )


@pytest.fixture()
def client(settings: Settings) -> Iterator[TestClient]:
    """A client of a real app (lifespan run) on the test database."""
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture()
def auth() -> dict[str, str]:
    """Headers of a known agent."""
    return {"Authorization": f"Bearer {AGENT_TOKEN}"}


@pytest.fixture()
def live_server(settings: Settings) -> Iterator[str]:
    """A real uvicorn server on a free loopback port, in a thread; yields its base URL."""
    from tests.helpers.services import serve_app

    with serve_app(create_app(settings)) as url:
        yield url
