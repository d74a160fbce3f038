"""Engines and sessions for SQLite (embedded default) and PostgreSQL, and schema upgrades."""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Table, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from timeline.errors import StoreUnavailable


def _alembic_dir() -> Path:
    """The migrations: beside the source tree, or where a wheel install put them."""
    source = Path(__file__).resolve().parent.parent / "alembic"
    if (source / "env.py").is_file():
        return source
    return Path(sys.prefix) / "share" / "fleetmedic" / "alembic"


ALEMBIC_DIR = _alembic_dir()
# A process paused or hung inside a transaction keeps its locks (the correlator's advisory lock,
# row locks) until its connection dies, and a paused server replica's connections never die:
# PostgreSQL ends such a session after this long instead, so the other replicas carry on.
PG_IDLE_IN_TRANSACTION_S = 60


def _sqlite_pragmas(busy_timeout_s: float) -> Any:
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        _set_pragmas(dbapi_conn, int(busy_timeout_s * 1000))

    return on_connect


def _set_pragmas(dbapi_conn: Any, busy_ms: int) -> None:
    cur = dbapi_conn.cursor()
    # WAL lets the dashboard read while ingest writes. synchronous=NORMAL in WAL mode loses no
    # committed transaction when the process crashes; only a power loss or OS crash may lose
    # the last ones (never corrupting the database): FULL's fsync per commit is not paid.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute(f"PRAGMA busy_timeout={busy_ms}")
    cur.execute("PRAGMA cache_size=-65536")  # 64 MiB: index pages of hot GPUs stay cached
    # Checkpoints fsync the database inside whichever commit crosses the threshold; fewer,
    # larger ones cut ingest stalls (measured: 17.5k -> 22k samples/s in `bench ingest`).
    cur.execute("PRAGMA wal_autocheckpoint=20000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def in_memory(url: str) -> bool:
    """Whether `url` is an SQLite database in one process's memory (no other process sees it)."""
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def make_engine(url: str, *, busy_timeout_s: float = 10.0, **kwargs: Any) -> Engine:
    """An engine for `url`; SQLite files get WAL, synchronous=NORMAL and a busy timeout.

    `busy_timeout_s` bounds the wait on a locked database: SQLite's busy timeout, PostgreSQL's
    lock_timeout. Past it the statement fails, and StoreUnavailable says "try again later".
    PostgreSQL sessions also end transactions left idle PG_IDLE_IN_TRANSACTION_S.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and not in_memory(url):
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": busy_timeout_s}, **kwargs
        )
        event.listen(engine, "connect", _sqlite_pragmas(busy_timeout_s))
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    ms = max(1, int(busy_timeout_s * 1000))
    idle_ms = PG_IDLE_IN_TRANSACTION_S * 1000
    options = f"-c lock_timeout={ms} -c idle_in_transaction_session_timeout={idle_ms}"
    kwargs.setdefault("connect_args", {"options": options})
    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_size", 10)
    return create_engine(url, **kwargs)


class WriteLock:
    """Serializes writers in this process on SQLite (a no-op on PostgreSQL), with a bound.

    SQLite takes one writer at a time; waiting on a Python lock is cheaper and fairer than
    SQLite's busy handler, which sleeps and polls. A writer that waits past `timeout_s` gets
    StoreUnavailable (503 with Retry-After) instead of queueing for ever.
    """

    def __init__(self, engine: Engine, timeout_s: float) -> None:
        self._lock = threading.Lock() if engine.dialect.name == "sqlite" else None
        self.timeout_s = timeout_s

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for one transaction."""
        if self._lock is None:
            yield
            return
        if not self._lock.acquire(timeout=self.timeout_s):
            raise StoreUnavailable("another write holds the database", RETRY_LOCKED_S)
        try:
            yield
        finally:
            self._lock.release()


def write_lock(engine: Engine, timeout_s: float = 10.0) -> WriteLock:
    """The write lock of one app on `engine`."""
    return WriteLock(engine, timeout_s)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """A session factory; callers own commit (one place per transaction)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def unit_of_work(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: commits on success, rolls back on any exception.

    A database that cannot take the work now (locked, full, unreachable) raises
    StoreUnavailable instead of the driver's error, so callers can say "retry later".
    """
    session = factory()
    try:
        with translated_errors():
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise
    finally:
        session.close()


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn a driver error that means "the database cannot take work now" into
    StoreUnavailable; any other error passes unchanged."""
    try:
        yield
    except Exception as exc:
        busy = unavailable(exc)
        if busy is not None:
            raise busy from exc
        raise


# Retry-After (seconds) by cause: a lock clears fast, a full disk needs a person.
RETRY_LOCKED_S, RETRY_UNREACHABLE_S, RETRY_FULL_S = 2, 5, 60
_PG_LOCKED = frozenset({"55P03", "40001", "40P01", "57014"})  # lock/serialization/deadlock/timeout


def unavailable(exc: BaseException) -> StoreUnavailable | None:
    """StoreUnavailable when `exc` means the database cannot take work now, else None.

    Locked or busy (SQLite busy timeout, PostgreSQL lock_timeout, deadlock), full (SQLITE_FULL,
    PostgreSQL disk_full) or unreachable (connection refused or lost, pool exhausted). Other
    errors (a broken query, a refused value) are bugs and stay what they are.
    """
    if isinstance(exc, sa_exc.TimeoutError):
        return StoreUnavailable("all database connections are busy", RETRY_LOCKED_S)
    # The samples fast path uses the driver's own cursor: its errors arrive unwrapped.
    orig: BaseException | None = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    if isinstance(orig, sqlite3.Error):
        return _sqlite_unavailable(str(orig).lower())
    state = str(getattr(orig, "sqlstate", None) or "")
    if state == "53100":
        return StoreUnavailable("database disk is full", RETRY_FULL_S)
    if state in _PG_LOCKED:
        return StoreUnavailable("database is locked", RETRY_LOCKED_S)
    invalidated = isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated
    if state.startswith(("08", "53", "57")) or invalidated:
        return StoreUnavailable("database unreachable or out of resources", RETRY_UNREACHABLE_S)
    if isinstance(exc, sa_exc.OperationalError) and not state:
        return StoreUnavailable("database unreachable", RETRY_UNREACHABLE_S)
    return None


def _sqlite_unavailable(msg: str) -> StoreUnavailable | None:
    if "locked" in msg or "busy" in msg:
        return StoreUnavailable("database is locked", RETRY_LOCKED_S)
    if "full" in msg:
        return StoreUnavailable("database or disk is full", RETRY_FULL_S)
    if "disk i/o error" in msg or "unable to open" in msg:
        return StoreUnavailable("database file cannot be written", RETRY_UNREACHABLE_S)
    return None


@contextmanager
def reading(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A read-only session; an unavailable database raises StoreUnavailable."""
    with translated_errors(), factory() as session:
        yield session


@contextmanager
def scratch_database(
    backend: str, *, pg_url: str, prefix: str = "fleetmedic_scratch"
) -> Iterator[str]:
    """A throwaway database for tests and benchmarks, removed afterwards.

    SQLite: a file in a temporary folder. PostgreSQL: a new database on the server of `pg_url`
    (which must allow CREATE DATABASE), dropped even while connections remain.
    """
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'scratch.db'}"
        return
    from sqlalchemy import text

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = make_engine(pg_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def wait_for_database(url: str, *, timeout_s: float) -> None:
    """Return once the database at `url` answers a query; raise its last error after timeout_s.

    For a migration job started together with its database (a Helm hook, a systemd unit).
    """
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError
    from tenacity import (
        Retrying,
        retry_if_exception_type,
        stop_after_delay,
        wait_exponential_jitter,
    )

    engine = make_engine(url, poolclass=NullPool)
    try:
        for attempt in Retrying(
            retry=retry_if_exception_type(DBAPIError),
            stop=stop_after_delay(timeout_s),
            wait=wait_exponential_jitter(multiplier=0.5, max=5.0, jitter=0.5),
            reraise=True,
        ):
            with attempt, engine.connect() as conn:
                conn.execute(text("select 1"))
    finally:
        engine.dispose()


def alembic_config(url: str) -> Any:
    """An Alembic Config pointing at the packaged migrations and `url`."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR))
    # ConfigParser treats % as interpolation; escape it in passwords.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the schema at `url` up to `revision` (Alembic is the only way a schema is made)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Take the schema at `url` down to `revision`."""
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def driver_connection(session: Session) -> Any:
    """The DBAPI connection under the session's transaction (sqlite3 or psycopg), for hot
    paths where SQLAlchemy Core's statement building cost more than the database's work."""
    raw = session.connection().connection.driver_connection
    assert raw is not None
    return raw


def marks(session: Session, n: int) -> str:
    """`n` DBAPI parameter placeholders for the session's driver (`?` or `%s`), joined."""
    return ", ".join(("?" if session.get_bind().dialect.name == "sqlite" else "%s",) * n)


def upsert_insert(session: Session, table: Table) -> Any:
    """A dialect insert that supports ON CONFLICT on both SQLite and PostgreSQL."""
    if session.get_bind().dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
