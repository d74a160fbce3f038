"""The FastAPI application: ingest, read API, pages, /metrics, health."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.middleware.sessions import SessionMiddleware
from starlette.staticfiles import StaticFiles

from timeline import __version__, db, samples, samples_stage, wal_checkpoint
from timeline.group_commit import GroupWriter
from timeline.samples_sql import SqlSampleStore
from timeline.settings import Settings
from web.api import actions, heatmap, incidents, ingest, ops, read
from web.api.ops import install_openapi
from web.auth import TokenTable
from web.errors import install_error_handlers
from web.fleetmetrics import DashboardCollector
from web.fleetstate import FleetCache
from web.healer_metrics import HealerCollector
from web.leader import LeaseElector
from web.logs import configure_logging
from web.metrics import GroupCommitCollector, ServerMetrics
from web.pages import ROUTERS as PAGE_ROUTERS
from web.pages import login as login_page
from web.runtime import ServerRuntime
from web.store_metrics import TableBytesCollector

log = logging.getLogger(__name__)

Configure = Callable[[ServerRuntime, Settings], None]
STATIC_DIR = Path(__file__).resolve().parent / "static"


def _routes(app: FastAPI) -> None:
    """Operations, the API, the pages and their static assets."""
    for router in (
        ops.router,
        login_page.router,
        ingest.router,
        read.router,
        incidents.router,
        actions.router,
        heatmap.router,
        *PAGE_ROUTERS,
    ):
        app.include_router(router)
    app.mount("/assets", StaticFiles(directory=STATIC_DIR), name="assets")


def _lifespan(
    settings: Settings, runtime: ServerRuntime, leader: LeaseElector, configure: Configure | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up adds the periodic work and joins the election; shutdown leaves it first."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if configure is not None:
            configure(runtime, settings)
        leader.start()
        if app.state.checkpointer is not None:
            app.state.checkpointer.start()
        if app.state.stage_mover is not None:
            app.state.stage_mover.start()
        _tune_gc()
        log.info("fleetmedic %s serving with %s", __version__, settings.safe_database_url())
        try:
            yield
        finally:
            leader.stop()  # stops the periodic work, then releases the lease
            if app.state.group_writer is not None:  # stores what is queued, into the stage
                app.state.group_writer.stop()
            if app.state.stage_mover is not None:
                app.state.stage_mover.stop()
            if app.state.checkpointer is not None:
                app.state.checkpointer.stop()
            app.state.engine.dispose()

    return lifespan


# gen0 collections every 50,000 net container allocations instead of 700: an ingest batch makes
# thousands of short-lived dicts and tuples, and the default thresholds spent ~4.5 ms of CPU a
# 1,000-sample batch in collections (measured under `bench ingest`; 10% of the server's time).
GC_THRESHOLDS = (50_000, 20, 100)


def _tune_gc() -> None:
    """Freeze what start-up made (never garbage: no collection walks it again) and collect
    young objects less often. Cycles are still collected, later and in larger sweeps."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _metrics(
    app: FastAPI, leader: LeaseElector, registry: CollectorRegistry | None
) -> ServerMetrics:
    """The server's own counters plus the fleet, healer and table-size families of /metrics."""
    factory, settings = app.state.session_factory, app.state.settings
    metrics = ServerMetrics(leader, registry=registry)
    metrics.registry.register(DashboardCollector(factory, settings, app.state.fleet_cache))
    metrics.registry.register(HealerCollector(factory))
    metrics.registry.register(TableBytesCollector(factory))
    if app.state.group_writer is not None:
        metrics.registry.register(GroupCommitCollector(app.state.group_writer))
    return metrics


def _store_state(
    app: FastAPI,
    settings: Settings,
    engine: Engine,
    factory: sessionmaker[Session],
    sample_store: samples.SampleStore,
) -> None:
    """What the requests share of the store: the engine, its write lock and the writers."""
    app.state.engine = engine
    app.state.session_factory = factory
    app.state.write_lock = db.write_lock(engine, settings.database_busy_timeout_s)
    # SQLite: WAL checkpoints beside the commits instead of inside one (timeline.wal_checkpoint)
    app.state.checkpointer = wal_checkpoint.for_engine(engine)
    # SQLite: staged samples filed into `samples` in bulk, beside the ingest (samples_stage)
    app.state.stage_mover = samples_stage.for_engine(engine, factory, app.state.write_lock)
    # Agents' sample batches, several per transaction (timeline.group_commit)
    app.state.group_writer = (
        GroupWriter(factory, app.state.write_lock) if settings.ingest_group_commit else None
    )
    # PostgreSQL classifies the fleet per node itself (timeline.fleet_cells): 100k GPUs. It
    # reads gpu_latest, which the SQL sample store keeps (VictoriaMetrics keeps its own).
    cells = engine.dialect.name == "postgresql" and isinstance(sample_store, SqlSampleStore)
    app.state.fleet_cache = FleetCache(settings.fleet_cache_s, factory, cells=cells)


def create_app(
    settings: Settings,
    *,
    configure: Configure | None = None,
    registry: CollectorRegistry | None = None,
) -> FastAPI:
    """Build the app; `configure` adds periodic jobs (cluster sources, correlator).

    `registry` is where /metrics reads from (a fresh one per app unless given).

    A malformed token setting is a ValueError here, before anything is served (fail closed).
    """
    tokens = TokenTable.from_settings(settings)
    engine = db.make_engine(settings.database_url, busy_timeout_s=settings.database_busy_timeout_s)
    factory = db.make_sessionmaker(engine)
    # Every sample read and write of this process goes through it (SQL or VictoriaMetrics).
    sample_store = samples.from_settings(settings)
    samples.use(sample_store)
    runtime = ServerRuntime(factory)
    # Every process (worker or replica) serves requests; only the lease holder runs periodic work.
    leader = LeaseElector(
        factory,
        on_elected=runtime.start_leading,
        on_deposed=runtime.stop_leading,
        lease_s=settings.leader_lease_s,
        renew_s=settings.leader_renew_s,
    )

    app = FastAPI(
        title="fleetmedic",
        version=__version__,
        description="GPU fleet observability and self-healing",
        lifespan=_lifespan(settings, runtime, leader, configure),
        # Served by web.api.ops, behind `docs_public`.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.tokens = tokens
    _store_state(app, settings, engine, factory, sample_store)
    app.state.metrics = _metrics(app, leader, registry)
    app.state.runtime = runtime
    app.state.sample_store = sample_store
    app.state.leader = leader
    app.add_middleware(
        SessionMiddleware,
        secret_key=tokens.session_secret(settings),
        session_cookie="fleetmedic_session",
        max_age=settings.session_max_age_s,
        same_site="lax",
        https_only=settings.session_https_only,
    )
    install_error_handlers(app)
    _routes(app)
    install_openapi(app)
    return app


def app_from_env() -> FastAPI:
    """The app as `serve --workers N` starts it in each worker (settings from the environment)."""
    from web.serving import GuardedHttpToolsProtocol, Limits
    from web.wiring import configure_runtime

    settings = Settings()
    # A worker process starts fresh: its logging and connection limits are set up here too.
    configure_logging(settings.log_level, settings.log_format)
    GuardedHttpToolsProtocol.configure(Limits.from_settings(settings))
    return create_app(settings, configure=configure_runtime)
