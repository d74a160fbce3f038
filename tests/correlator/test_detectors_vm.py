"""The idle, hang and busy-again detectors on the VictoriaMetrics samples store: the same tests,
on the same recorded H100 telemetry, pass unchanged, so the findings are the ones SQL gives.

Each test below is the SQL test itself, collected again here, where the `on_vm` fixture makes
the process's sample store a real VictoriaMetrics for it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.correlator import test_hang_detection as hang
from tests.correlator import test_idle_findings as idle
from tests.correlator import test_idle_tracker as tracker
from tests.correlator import test_incidents_lifecycle as lifecycle
from tests.correlator.test_idle_tracker import recorded  # noqa: F401  (a fixture)
from timeline import queries
from timeline.samples_vm import VmSampleStore

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _telemetry_in_vm_only(
    on_vm: VmSampleStore, session_factory: sessionmaker[Session]
) -> Iterator[None]:
    """Proof each test ran on VictoriaMetrics: its samples are there and none in SQL."""
    yield
    stored = on_vm.vm.export('{__name__="fleetmedic_gpu_sample"}', start=0.0, end=2e9)
    assert sum(len(line["values"]) for line in stored) > 0
    with session_factory() as s:
        assert queries.count_rows(s, table="samples") == 0


test_vm_idle_findings_with_cost = (
    idle.test_allocated_gpus_idle_for_30_minutes_become_findings_with_cost
)
test_vm_idle_totals = idle.test_idle_totals_aggregate_per_job_user_and_account
test_vm_idle_duration = (
    idle.test_idle_below_the_duration_is_no_finding_and_the_duration_is_configurable
)
test_vm_idle_resolves_when_busy = (
    idle.test_finding_resolves_when_the_gpu_is_busy_again_and_keeps_its_waste
)
test_vm_idle_resolves_when_released = idle.test_finding_resolves_when_the_allocation_ends
test_vm_idle_warm_passes = (
    tracker.test_warm_idle_passes_read_the_last_minute_and_late_telemetry_and_open_what_cold_does
)
test_vm_idle_late_busy_sample = (
    tracker.test_a_busy_sample_that_arrives_late_still_resolves_the_finding
)
test_vm_idle_peak = (
    tracker.test_a_findings_peak_utilization_is_its_idle_spans_not_the_busy_work_before
)
test_vm_hang_flagged_within_60s = hang.test_real_spin_is_flagged_within_60s_and_real_compute_is_not
test_vm_compute_never_flagged = hang.test_compute_alone_for_five_minutes_is_never_flagged
test_vm_hang_resolves = hang.test_hang_resolves_when_the_gpus_compute_again
test_vm_hang_wandb_stall = hang.test_wandb_step_stall_raises_confidence
test_vm_hang_log_silent = hang.test_job_log_going_silent_when_the_spin_begins_raises_confidence
test_vm_incident_resolves_when_gpu_busy = (
    lifecycle.test_incident_resolves_when_its_gpu_is_busy_again
)
