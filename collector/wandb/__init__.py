"""W&B source: training progress per job from wandb run directories and the public API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collector.wandb.runfile import RunStatus
from collector.wandb.source import JobState, ProgressTracker, WandbSource, job_link
from timeline.settings import Settings

__all__ = [
    "JobState",
    "ProgressTracker",
    "RunStatus",
    "WandbSource",
    "build_wandb_source",
    "job_link",
]


def build_wandb_source(
    settings: Settings,
    *,
    job_state: JobState | None = None,
    clock: Callable[[], float] | None = None,
    api: Any = None,
) -> WandbSource:
    """The source as configured; the W&B API client is made only when projects are set."""
    if api is None and settings.wandb_projects:
        import wandb

        key = settings.wandb_api_key.get_secret_value() if settings.wandb_api_key else None
        api = wandb.Api(api_key=key) if key else wandb.Api()
    kwargs: dict[str, Any] = {"clock": clock} if clock is not None else {}
    return WandbSource(
        settings.wandb_dirs,
        stall_after_s=settings.wandb_stall_minutes * 60.0,
        job_state=job_state,
        api=api,
        projects=settings.wandb_projects,
        **kwargs,
    )
