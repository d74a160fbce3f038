"""Recorded output of a real Slurm 22.05 cluster (tests/fixtures/slurm/) for SlurmSource."""

from __future__ import annotations

from pathlib import Path

from collector.slurm import RecordedRunner, SlurmSource

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "slurm"
T0 = 1795349800.0  # after every recorded job ended


def read(name: str) -> str:
    """One recorded reply."""
    return (FIX / name).read_text()


def recorded(
    ctl: str = "scontrol_show_job_d_running.txt", node: str = "scontrol_show_node.txt"
) -> RecordedRunner:
    """A runner replying to SlurmSource's four commands with recorded output."""
    return RecordedRunner(
        {
            "sacct --json": read("sacct.json"),
            "sacct -P": read("sacct_duplicates.psv"),
            "scontrol show job": read(ctl),
            "scontrol show node": read(node),
        }
    )


class Clock:
    """A clock a test moves by hand."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(runner: RecordedRunner, t: float = T0) -> tuple[SlurmSource, Clock]:
    """A SlurmSource on the recorded cluster 'lab' with its own clock."""
    clock = Clock(t)
    return SlurmSource(runner, clock, cluster="lab", lookback_s=3600, overlap_s=300), clock


def live_replies(tag: str) -> dict[str, str]:
    """The exact commands SlurmSource runs, recorded by record_fixtures.py on a real cluster."""
    d = FIX / "live"
    return {
        "sacct --json": (d / f"{tag}_sacct_json.json").read_text(),
        "sacct -P": (d / f"{tag}_sacct_psv.txt").read_text(),
        "scontrol show job": (d / f"{tag}_scontrol_show_job_d.txt").read_text(),
        "scontrol show node": (d / f"{tag}_scontrol_show_node.txt").read_text(),
    }
