"""Alembic environment: runs migrations against the URL in the config (set by timeline.db)."""

from __future__ import annotations

from sqlalchemy import pool

import correlator.tables  # noqa: F401  (registers the correlator's tables on metadata)
import healer.tables  # noqa: F401  (registers the healer's tables on metadata)
import timeline.deliveries  # noqa: F401  (registers the notifications table)
from alembic import context
from timeline.db import make_engine
from timeline.partitions import include_object
from timeline.tables import metadata

config = context.config
target_metadata = metadata


def run_migrations_offline() -> None:
    """Emit SQL without a connection."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run migrations in one transaction per revision on a live connection."""
    url = config.get_main_option("sqlalchemy.url")
    assert url is not None
    engine = make_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        # render_as_batch lets ALTER-style migrations work on SQLite too.
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            include_object=include_object,  # day partitions are data, not schema
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
