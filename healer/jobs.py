"""How the server runs the healer: one thread, woken right after a correlator pass that opened
or changed an incident (and every healer_interval_s for reconciling, backoffs and returns).

One healer per database (healer.safety.HealerLock); a pass that cannot take the lock does
nothing. `fence` (issue #13's leadership callback) is handed to every state change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from healer.flows import plan_once, run_steps
from healer.holds import reconcile
from healer.models import HealReport
from healer.policy import PolicyFile
from healer.safety import HealerLock
from healer.steps import Actor, HealerContext
from timeline.errors import StaleLeader
from timeline.settings import Settings

log = logging.getLogger(__name__)


def heal_once(ctx: HealerContext, *, reconcile_holds: bool = True) -> HealReport:
    """One pass: plan from new incident writes, step ready actions, reconcile held nodes
    (after the steps: a new fault's drain must not wait on checks of older holds)."""
    started = time.monotonic()
    report = HealReport()
    plan_once(ctx, report=report)
    run_steps(ctx, report=report)
    if reconcile_holds:
        reconcile(ctx, report=report)
        run_steps(ctx, report=report)  # returns planned by the reconcile
    report.duration_s = time.monotonic() - started
    return report


class HealerRunner:
    """The healer's loop: a pass when woken or every interval; failures logged, never fatal."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        engine: Engine,
        policy: PolicyFile,
        actors: dict[str, Actor],
        lock_dir: Path,
        interval_s: float = 5.0,
        reconcile_s: float = 5.0,
        runner: Any = None,
        fence: Callable[[Session], None] | None = None,
    ) -> None:
        self.factory = factory
        self.policy = policy
        self.actors = actors
        self.runner = runner
        self.fence = fence
        self.interval_s = interval_s
        self.reconcile_s = reconcile_s
        self.lock = HealerLock(engine, lock_dir=lock_dir)
        self.wake = threading.Event()
        self.last: HealReport | None = None
        self._reconciled = 0.0

    def context(self) -> HealerContext:
        """The context of one pass, with the policy as the file says now."""
        return HealerContext(
            factory=self.factory,
            policy=self.policy.current(),
            actors=self.actors,
            runner=self.runner,
            fence=self.fence,
        )

    def run_once(self) -> HealReport:
        """One pass under the one-healer lock."""
        if not self.lock.acquire():
            return HealReport(skipped="another healer holds this database")
        due = time.monotonic() - self._reconciled >= self.reconcile_s
        if due:
            self._reconciled = time.monotonic()
        try:
            report = heal_once(self.context(), reconcile_holds=due)
        except StaleLeader as exc:  # another replica leads now: its healer does the work
            log.warning("healer pass refused, this process no longer leads: %s", exc)
            return HealReport(skipped=f"not the leader: {exc}")
        if report.planned or report.done or report.failed or report.cancelled or report.released:
            log.info(
                "healer: %d planned, %d done, %d failed, %d cancelled, %d nodes released",
                report.planned,
                report.done,
                report.failed,
                report.cancelled,
                report.released,
            )
        self.last = report
        return report

    def _sleep(self, seconds: float, stop: threading.Event) -> None:
        """Until woken, stopped, or `seconds` passed (stop is looked at every 0.25 s)."""
        deadline = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < deadline:
            if self.wake.wait(min(0.25, max(0.0, deadline - time.monotonic()))):
                return

    def loop(self, stop: threading.Event) -> None:
        """Run passes until `stop`; a pass with work waiting comes back sooner."""
        try:
            while not stop.is_set():
                try:
                    report = self.run_once()
                except Exception:
                    log.exception("healer pass failed; the next one retries")
                    report = HealReport()
                soon = report.waiting > 0
                self._sleep(0.2 if soon else self.interval_s, stop)
                self.wake.clear()
        finally:
            self.lock.release()


def build_actors(settings: Settings) -> tuple[dict[str, Actor], Any]:
    """The actors the settings allow (Slurm, Kubernetes) and the command runner for validation
    and GPU-reset commands."""
    from collector.slurm.runner import SubprocessRunner

    runner = SubprocessRunner(bin_dir=settings.slurm_bin_dir, slurm_conf=settings.slurm_conf)
    actors: dict[str, Actor] = {}
    if settings.slurm_enabled:
        from healer.slurm import SlurmActor

        actors["slurm"] = SlurmActor(
            runner,
            cluster=settings.slurm_cluster,
            script_dir=settings.data_dir / "healer" / "scripts",
            timeout_s=settings.healer_command_timeout_s,
        )
    if settings.kubernetes_enabled:
        from collector.kubernetes import build_api_client
        from healer.kubernetes import KubernetesActor

        kinds = tuple(PolicyFile(settings.healer_policy_file).current().kubernetes_recreate)
        actors["kubernetes"] = KubernetesActor(
            build_api_client(settings),
            cluster=settings.kubernetes_cluster,
            recreate_kinds=kinds,
            timeout_s=settings.healer_command_timeout_s,
        )
    return actors, runner


def build_runner(
    settings: Settings,
    *,
    factory: sessionmaker[Session],
    engine: Engine,
    fence: Callable[[Session], None] | None = None,
) -> HealerRunner:
    """The healer as the server runs it (observe mode unless the policy switches acting on);
    `fence` refuses its state changes once this process no longer leads."""
    actors, runner = build_actors(settings)
    return HealerRunner(
        factory,
        engine=engine,
        policy=PolicyFile(settings.healer_policy_file),
        actors=actors,
        lock_dir=settings.data_dir,
        interval_s=settings.healer_interval_s,
        runner=runner,
        fence=fence,
    )
