"""The Slurm cluster source (scheduled in the server): jobs, GPU allocations, nodes."""

from __future__ import annotations

import time

from collector.slurm.runner import CommandResult, CommandRunner, RecordedRunner, SubprocessRunner
from collector.slurm.source import SlurmSource
from timeline.settings import Settings

__all__ = [
    "CommandResult",
    "CommandRunner",
    "RecordedRunner",
    "SlurmSource",
    "SubprocessRunner",
    "build_slurm_source",
]


def build_slurm_source(settings: Settings) -> SlurmSource | None:
    """The SlurmSource the server polls every settings.slurm_poll_s, or None when disabled."""
    if not settings.slurm_enabled:
        return None
    runner = SubprocessRunner(bin_dir=settings.slurm_bin_dir, slurm_conf=settings.slurm_conf)
    return SlurmSource(
        runner,
        time.time,
        cluster=settings.slurm_cluster,
        lookback_s=settings.slurm_lookback_s,
        overlap_s=settings.slurm_overlap_s,
        command_timeout_s=settings.slurm_command_timeout_s,
    )
