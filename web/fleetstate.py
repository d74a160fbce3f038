"""The classified fleet as the pages, the API and /metrics share it.

Failing comes from the correlator's open incidents (correlator.service.failing_set); the
timeline only joins it with telemetry and allocations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from correlator import service as incidents
from timeline import fleet
from timeline.fleet import GpuState, GpuView, NodeView
from timeline.settings import Settings

STATE_CODES = {
    GpuState.BUSY: "b",
    GpuState.IDLE_ALLOCATED: "i",
    GpuState.FREE: "f",
    GpuState.FAILING: "x",
    GpuState.STALE: "s",
}


def classified_fleet(session: Session, *, settings: Settings, now: float) -> list[NodeView]:
    """Every node and GPU classified, failing from open incidents that blame them."""
    return fleet.fleet_view(
        session,
        now=now,
        failing=incidents.failing_set(session),
        idle_threshold=settings.idle_util_threshold,
    )


@dataclass
class FleetFilter:
    """The fleet page's filters; empty means any."""

    partition: str = ""
    user: str = ""
    account: str = ""
    model: str = ""

    def active(self) -> bool:
        """True when any filter is set."""
        return any((self.partition, self.user, self.account, self.model))

    def keeps(self, gpu: GpuView) -> bool:
        """True when the GPU passes every set filter."""
        return (
            (not self.partition or gpu.partition == self.partition)
            and (not self.user or gpu.user == self.user)
            and (not self.account or gpu.account == self.account)
            and (not self.model or gpu.name == self.model)
        )


@dataclass
class FilterOptions:
    """The values each filter can take, from the unfiltered fleet."""

    partitions: set[str] = field(default_factory=set)
    users: set[str] = field(default_factory=set)
    accounts: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)

    def add(self, gpu: GpuView) -> None:
        """Collect one GPU's values."""
        for bucket, value in (
            (self.partitions, gpu.partition),
            (self.users, gpu.user),
            (self.accounts, gpu.account),
            (self.models, gpu.name),
        ):
            if value:
                bucket.add(value)


def apply_filter(nodes: list[NodeView], flt: FleetFilter) -> tuple[list[NodeView], FilterOptions]:
    """Nodes with only the GPUs that pass the filter (nodes left empty dropped), and options."""
    options = FilterOptions()
    kept: list[NodeView] = []
    for node in nodes:
        gpus = []
        for g in node.gpus:
            options.add(g)
            if flt.keeps(g):
                gpus.append(g)
        if gpus or not flt.active():
            kept.append(
                NodeView(
                    node.name,
                    node.state,
                    node.reason,
                    node.group,
                    node.reason_user,
                    node.reason_ts,
                    gpus,
                )
            )
    return kept, options
