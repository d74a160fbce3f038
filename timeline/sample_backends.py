"""The process's sample store, chosen by `samples_backend`: the SQL store or VictoriaMetrics."""

from __future__ import annotations

import httpx

from timeline import samples
from timeline.samples import SampleStore
from timeline.settings import Settings


def store_from_settings(settings: Settings) -> SampleStore:
    """A new store for the configured backend."""
    if settings.samples_backend == "victoriametrics":
        from timeline.samples_vm import VmSampleStore
        from timeline.vm_client import VmClient

        client = httpx.Client(timeout=settings.victoriametrics_timeout_s)
        vm = VmClient(settings.victoriametrics_url, client=client)
        return VmSampleStore(vm, latest_lookback_s=settings.victoriametrics_latest_lookback_s)
    return samples.SqlSampleStore()


def use_configured(settings: Settings) -> SampleStore:
    """Make the configured backend the process's sample store (server start-up)."""
    chosen = store_from_settings(settings)
    samples.use(chosen)
    return chosen
