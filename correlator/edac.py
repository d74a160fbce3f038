"""Memory modules that keep correcting errors: one EDAC CE line is a report (no verdict), but a
module whose corrected errors reach mcelog's per-DIMM trigger (10 in 24 h) is failing. The
correlator sums each node's CE lines per module over the store's last 24 hours, as `explain`
sums a text's (collector/parse/kernel_edac.py holds the formats, counts and windowing both use),
and files one node incident per node and module, with the `edac_ce_over_dimm_threshold` rule's
verdict (correlator/rules/emitters/linux_kernel.json)."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy.orm import Session

from collector.parse.kernel_edac import (
    CE_THRESHOLD,
    CE_WINDOW_S,
    FAULT,
    most_in_a_day,
    over_threshold_message,
)
from correlator.attribution import Ev, select_events, to_ev
from correlator.holdings import GpuDirectory
from correlator.incidents import IncidentBook, fingerprint
from correlator.rules import classify_event
from correlator.taxonomy import Verdict
from timeline import tables as t
from timeline.models import Event, EventKind, Severity

_MAX_LINES = 20_000  # CE lines read per node and pass: a storm's day is far fewer events


def is_ce(ev: Ev) -> bool:
    """An event of one EDAC CE line, as the agent's kernel parser emits it."""
    return (
        ev.kind is EventKind.OTHER
        and "EDAC" in ev.message
        and ev.payload.get("fault") == FAULT
        and isinstance(ev.payload.get("ce_count"), int)
    )


def _errors(ev: Ev) -> int:
    """The CE errors an event reports: its line's count times the lines of its flood."""
    return int(ev.payload["ce_count"]) * max(1, ev.count)


class CeStorms:
    """The nodes whose CE lines came in this pass, then their modules over the trigger."""

    def __init__(self, session: Session, *, book: IncidentBook) -> None:
        self.session, self.book = session, book
        self.spans: dict[str, tuple[float, float]] = {}  # node -> (first, last) new CE line

    def note(self, ev: Ev) -> None:
        """Remember a CE line's node and time, to count its modules after the pass."""
        if ev.node is None or not is_ce(ev):
            return
        lo, hi = self.spans.get(ev.node, (ev.ts, ev.ts))
        self.spans[ev.node] = (min(lo, ev.ts), max(hi, ev.ts))

    def file(self, gpus: GpuDirectory) -> list[Ev]:
        """File (or update) one incident per node and module at or over the trigger; the CE
        events those incidents now hold (the pass records their ingest latency)."""
        filed: list[Ev] = []
        for node, (lo, hi) in sorted(self.spans.items()):
            for module, evs in self._modules(node, lo - CE_WINDOW_S, hi, gpus).items():
                count, span = most_in_a_day((e.ts, _errors(e)) for e in evs)
                if count >= CE_THRESHOLD and self._file(node, module, evs, count, span):
                    filed += evs
        self.spans.clear()
        return filed

    def _modules(
        self, node: str, since: float, until: float, gpus: GpuDirectory
    ) -> dict[str, list[Ev]]:
        """The node's CE events in [since, until] from the store, per module, oldest first."""
        e = t.events
        stmt = (
            select_events()
            .where(e.c.node == node, e.c.kind == EventKind.OTHER.value)
            .where(e.c.ts >= since, e.c.ts <= until, e.c.message.like("%EDAC%"))
            .order_by(e.c.ts, e.c.id)
            .limit(_MAX_LINES)
        )
        out: dict[str, list[Ev]] = defaultdict(list)
        for row in self.session.execute(stmt).mappings():
            ev = to_ev(row, gpus)
            if is_ce(ev):
                out[str(ev.payload.get("module"))].append(ev)
        return out

    def _file(self, node: str, module: str, evs: list[Ev], count: int, span: float) -> bool:
        last = evs[-1]
        verdict = _verdict(node, module, count, span, last)
        if verdict is None:  # the rule is gone: nothing to say the sum means
            return False
        inc = self.book.get_or_open(fingerprint("edac_ce", node, module), last, verdict, None)
        self.book.raise_root(inc, last, verdict)
        inc.culprit_node = node
        inc.count = count  # the day's sum, read again from the store each pass
        inc.opened_ts = min(inc.opened_ts, evs[0].ts)
        inc.last_seen_ts = max(inc.last_seen_ts, last.ts)
        inc.details["memory_module"] = module
        self.book.add_evidence(inc, evs)
        return True


def _verdict(node: str, module: str, count: int, span: float, last: Ev) -> Verdict | None:
    """The rules' verdict on the module's sum, read as `explain` reads it."""
    event = Event.model_construct(
        ts=last.ts, node=node, source="correlator", kind=EventKind.OTHER, gpu_uuid=None,
        pci_bus_id=None, job_id=None, code=None, severity=Severity.WARNING,
        message=over_threshold_message(module, count, span), raw=last.raw, payload={},
        count=1, dedup_key=None,
    )  # fmt: skip
    return classify_event(event)
