"""What the server runs periodically, chosen by settings: cluster sources, the correlator and
the healer (observe mode unless its policy switches acting on)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from timeline import db, queries
from timeline.settings import Settings
from web.runtime import ScheduledSource, ServerRuntime

if TYPE_CHECKING:
    from correlator.models import CorrelationReport
    from healer.jobs import HealerRunner

log = logging.getLogger(__name__)


def _job_state(runtime: ServerRuntime, job_id: str) -> str | None:
    with runtime.factory() as session:
        job = queries.get_job(session, job_id=job_id)
    return None if job is None else str(job["state"])


def _telemetry_jobs(runtime: ServerRuntime, settings: Settings) -> None:
    """Rollups and retention of the SQL sample store: the embedded default never fills a disk."""
    from timeline import rollups

    keep = rollups.retention_of(settings)
    runtime.add(
        "samples:rollup",
        lambda: rollups.run_rollups(runtime.factory),
        settings.samples_rollup_interval_s,
    )
    runtime.add(
        "samples:retention",
        lambda: rollups.run_retention(runtime.factory, keep=keep),
        settings.samples_retention_interval_s,
    )


def configure_runtime(runtime: ServerRuntime, settings: Settings) -> None:
    """Register the cluster sources and the correlator that the settings switch on."""
    _cluster_sources(runtime, settings)
    if settings.samples_backend == "sql":  # VictoriaMetrics keeps and drops its own
        _telemetry_jobs(runtime, settings)
    if settings.prometheus_enabled:
        from collector.prometheus import build_prometheus_source
        from web.runtime import append_by_node

        prom = build_prometheus_source(settings)
        runtime.add(
            "source:prometheus",
            lambda: append_by_node(runtime.factory, source=prom),
            settings.prometheus_interval_s,
        )
        log.info("prometheus source every %.0f s", settings.prometheus_interval_s)
    healer = _healer(runtime, settings)
    if settings.correlator_enabled:
        run_pass = _correlator_pass(runtime, settings)

        def correlate() -> None:
            report = run_pass()
            changed = report is not None and (
                report.incidents_opened or report.incidents_updated or report.incidents_resolved
            )
            if changed and healer is not None:
                healer.wake.set()  # act on a new incident now, not at the next healer interval

        runtime.add("correlator", correlate, settings.correlator_interval_s)
    if settings.notify_enabled:
        _notifier(runtime, settings)


def _cluster_sources(runtime: ServerRuntime, settings: Settings) -> None:
    """The Slurm, Kubernetes and W&B sources the settings switch on."""
    if settings.slurm_enabled:
        from collector.slurm import build_slurm_source

        slurm = build_slurm_source(settings)
        if slurm is not None:
            runtime.add_source(ScheduledSource(slurm, settings.slurm_poll_s))
            log.info("slurm source every %.0f s", settings.slurm_poll_s)
    if settings.kubernetes_enabled:
        from collector.kubernetes import build_kubernetes_source

        runtime.add_stream(build_kubernetes_source(settings))
        log.info("kubernetes source watching pods, events and nodes")
    if settings.wandb_enabled:
        from collector.wandb import build_wandb_source

        wandb = build_wandb_source(settings, job_state=lambda j: _job_state(runtime, j))
        runtime.add_source(ScheduledSource(wandb, settings.wandb_interval_s))
        log.info("wandb source every %.0f s", settings.wandb_interval_s)


def _notifier(runtime: ServerRuntime, settings: Settings) -> None:
    from web.notify.jobs import build_notifier, run_notifier

    notifier = build_notifier(runtime.factory, settings)
    # The lease fence: a leader that lost its term records nothing as sent (issue #13).
    runtime.add(
        "notifier", lambda: run_notifier(notifier, fence=runtime.fence), settings.notify_interval_s
    )
    log.info(
        "notifier every %.0f s on %d routes",
        settings.notify_interval_s,
        len(notifier.config.routes),
    )


def _correlator_pass(
    runtime: ServerRuntime, settings: Settings
) -> Callable[[], CorrelationReport | None]:
    """One correlator pass: in a child process the leader replaces when it has grown, or here."""
    # An in-memory SQLite database is this process's own: a child would see an empty one.
    if settings.correlator_process and not db.in_memory(settings.database_url):
        from web.correlator_process import CorrelatorProcess

        child = CorrelatorProcess(
            settings,
            max_rss_mb=settings.correlator_process_max_rss_mb,
            timeout_s=settings.correlator_process_timeout_s,
        )
        runtime.closers.append(child.close)
        log.info("correlator passes in a child process (replaced over %.0f MB)",
                 settings.correlator_process_max_rss_mb)  # fmt: skip
        return child.run_pass

    from web.correlator_process import pass_and_trim

    return lambda: pass_and_trim(runtime.factory, settings)


def _healer(runtime: ServerRuntime, settings: Settings) -> HealerRunner | None:
    if not settings.healer_enabled:
        return None
    from healer.jobs import build_runner

    engine = runtime.factory.kw["bind"]
    healer = build_runner(settings, factory=runtime.factory, engine=engine, fence=runtime.fence)
    runtime.add_thread("healer", healer.loop)
    runtime.healer = healer
    log.info("healer on (%s)", settings.healer_policy_file or "default policy: observe only")
    return healer
