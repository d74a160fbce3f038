"""Memory modules that keep correcting errors: one EDAC CE line is a report (no verdict), but a
module whose corrected errors reach mcelog's per-DIMM trigger (10 in 24 h) is failing. The
correlator sums each node's CE lines per module over the store's 24 hours around them, as
`explain` sums a text's (collector/parse/kernel_edac.py holds the formats, counts and windowing
both use), and files one node incident per node and module, with the `edac_ce_over_dimm_threshold`
rule's verdict (correlator/rules/emitters/linux_kernel.json). Its evidence is the CE lines of
the busiest day, the one whose sum it reports.

A storm is often the prelude to an uncorrected error on the same module, and a machine check or
EDAC UE line files the node's own hardware incident (incidents.identity). One failing module is
one incident: a storm within a day of that node's machine check (one naming the storm's module,
or naming none) is that incident's supporting evidence, whichever came first, and the stronger
verdict (the machine check's) stays its root; a storm incident filed before the check arrived
is resolved as superseded by it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import or_
from sqlalchemy.orm import Session

from collector.parse.kernel_edac import (
    CE_THRESHOLD,
    CE_WINDOW_S,
    FAULT,
    MACHINE_CHECKS,
    busiest_day,
    over_threshold_message,
)
from correlator.attribution import Ev, select_events, to_ev
from correlator.holdings import GpuDirectory
from correlator.incidents import IncidentBook, fingerprint
from correlator.models import Incident, IncidentState
from correlator.rules import classify_event
from correlator.taxonomy import Verdict
from timeline import tables as t
from timeline.models import Event, EventKind, Severity

_MAX_LINES = 20_000  # CE lines read per node and pass: a storm's day is far fewer events
# what the message of a CE event holds: an EDAC CE line, or a corrected GHES memory record
_CE_TEXTS = ("EDAC", "[Hardware Error]")
CHECKED = "machine_check_modules"  # details: modules its machine checks name (None: none named)
STORMS = "ce_storms"  # details: module -> the storm's count, span and evidence event ids


def is_ce(ev: Ev) -> bool:
    """An event of one EDAC CE line (or corrected GHES memory record naming its DIMM), as the
    agent's kernel parser emits it."""
    return (
        ev.kind is EventKind.OTHER
        and any(t in ev.message for t in _CE_TEXTS)
        and ev.payload.get("fault") == FAULT
        and isinstance(ev.payload.get("ce_count"), int)
    )


def is_machine_check(ev: Ev) -> bool:
    """An event of a machine check or an EDAC uncorrected error, as the agent emits it."""
    return ev.kind is EventKind.OTHER and ev.payload.get("fault") in MACHINE_CHECKS


def _errors(ev: Ev) -> int:
    """The CE errors an event reports: its line's count times the lines of its flood."""
    return int(ev.payload["ce_count"]) * max(1, ev.count)


@dataclass(frozen=True)
class Storm:
    """One module's busiest day at or over the trigger: its CE events, sum and span."""

    node: str
    module: str
    events: list[Ev]  # the day's CE events, oldest first: the evidence
    count: int
    span: float
    newest: float  # the module's newest CE line read (it may come after the busiest day)


class CeStorms:
    """The nodes whose CE lines or machine checks came in this pass, then their modules over
    the trigger."""

    def __init__(self, session: Session, *, book: IncidentBook) -> None:
        self.session, self.book = session, book
        self.spans: dict[str, tuple[float, float]] = {}  # node -> (first, last) time to read
        self.ce_nodes: set[str] = set()  # nodes with new CE lines in this pass

    def _extend(self, node: str, lo: float, hi: float) -> None:
        old_lo, old_hi = self.spans.get(node, (lo, hi))
        self.spans[node] = (min(lo, old_lo), max(hi, old_hi))

    def note(self, ev: Ev) -> None:
        """Remember a CE line's node and time, to count its modules after the pass."""
        if ev.node is None or not is_ce(ev):
            return
        self._extend(ev.node, ev.ts, ev.ts)
        self.ce_nodes.add(ev.node)

    def checked(self, ev: Ev, inc: Incident) -> None:
        """A machine check or UE filed in `inc`: mark the incident with the module the line
        names (None: it names none), and read the node's storms of the day either side."""
        if ev.node is None or inc.job_id is not None or not is_machine_check(ev):
            return
        module = str(ev.payload["module"]) if ev.payload.get("module") else None
        modules = inc.details.setdefault(CHECKED, [])
        if module not in modules:
            modules.append(module)
        if module is not None:
            inc.details.setdefault("memory_module", module)
        self._extend(ev.node, ev.ts, ev.ts + CE_WINDOW_S)

    def file(self, gpus: GpuDirectory) -> list[Ev]:
        """File (or update) one incident per node and module at or over the trigger; the CE
        events those incidents now hold (the pass records their ingest latency)."""
        filed: list[Ev] = []
        for node, (lo, hi) in sorted(self.spans.items()):
            for module, evs in self._modules(node, lo - CE_WINDOW_S, hi, gpus).items():
                count, first, last = busiest_day([(e.ts, _errors(e)) for e in evs])
                if count < CE_THRESHOLD:
                    continue
                day = evs[first : last + 1]
                storm = Storm(node, module, day, count, day[-1].ts - day[0].ts, evs[-1].ts)
                if self._file(storm, own=node in self.ce_nodes):
                    filed += day
        self.spans.clear()
        self.ce_nodes.clear()
        return filed

    def _modules(
        self, node: str, since: float, until: float, gpus: GpuDirectory
    ) -> dict[str, list[Ev]]:
        """The node's CE events in [since, until] from the store, per module, oldest first."""
        e = t.events
        stmt = (
            select_events()
            .where(e.c.node == node, e.c.kind == EventKind.OTHER.value)
            .where(e.c.ts >= since, e.c.ts <= until)
            .where(or_(*(e.c.message.like(f"%{t}%") for t in _CE_TEXTS)))
            .order_by(e.c.ts, e.c.id)
            .limit(_MAX_LINES)
        )
        out: dict[str, list[Ev]] = defaultdict(list)
        for row in self.session.execute(stmt).mappings():
            ev = to_ev(row, gpus)
            if is_ce(ev):
                out[str(ev.payload.get("module"))].append(ev)
        return out

    def _file(self, storm: Storm, *, own: bool) -> bool:
        """Hold the storm in the node's machine-check incident, or else (when its CE lines
        came in this pass) in its own; whether an incident holds it."""
        verdict = _verdict(storm)
        if verdict is None:  # the rule is gone: nothing to say the sum means
            return False
        fp = fingerprint("edac_ce", storm.node, storm.module)
        target = self._checked_incident(storm)
        mine = self.book.by_fp.get(fp)
        if target is not None:
            if mine is not None and mine.state is IncidentState.OPEN:
                why = f"{target.title} on {storm.node}; these corrected errors support it"
                self.book.retire(mine, why=why)
            inc = target
        elif own:
            inc = self.book.get_or_open(fp, storm.events[-1], verdict, None)
            inc.culprit_node = storm.node
            inc.count = storm.count  # the day's sum, read again from the store each pass
        else:  # only a machine check elsewhere on the node re-read it: nothing new to file
            return False
        self._hold(inc, storm, verdict)
        return True

    def _checked_incident(self, storm: Storm) -> Incident | None:
        """The node's open incident holding a machine check that names the storm's module or
        none, within a day of the storm (the strongest, if several)."""
        lo, hi = storm.events[0].ts - CE_WINDOW_S, storm.newest + CE_WINDOW_S
        found = [
            i
            for i in self.book.by_node.get(storm.node, ())
            if self.book.by_fp.get(i.fingerprint) is i
            and i.state is IncidentState.OPEN
            and i.job_id is None
            and _names(i, storm.module)
            and i.opened_ts <= hi
            and i.last_seen_ts >= lo
        ]
        return max(found, key=_strength, default=None)

    def _hold(self, inc: Incident, storm: Storm, verdict: Verdict) -> None:
        """Make the storm's day the incident's evidence of that module, replacing an earlier
        day's; the storm is the root while nothing stronger is."""
        storms = inc.details.setdefault(STORMS, {})
        before = set(storms.get(storm.module, {}).get("event_ids", []))
        if (
            verdict.priority > int(inc.details.get("priority", -1))
            or inc.root_cause_event_id in before
        ):
            self.book.set_root(inc, storm.events[-1], verdict)
        inc.evidence_event_ids = [i for i in inc.evidence_event_ids if i not in before]
        self.book.add_evidence(inc, storm.events)
        cap = self.book.evidence_cap
        storms[storm.module] = {
            "count": storm.count,
            "span_s": round(storm.span, 1),
            "event_ids": [e.id for e in storm.events][:cap],
        }
        inc.details.setdefault("supporting", {})[f"edac_ce {storm.module}"] = (
            over_threshold_message(storm.module, storm.count, storm.span)
        )
        inc.details.setdefault("memory_module", storm.module)
        inc.opened_ts = min(inc.opened_ts, storm.events[0].ts)
        inc.last_seen_ts = max(inc.last_seen_ts, storm.newest)


def _strength(inc: Incident) -> tuple[int, float]:
    """An incident's rank among a storm's candidates: its verdict's priority, then recency."""
    return int(inc.details.get("priority", -1)), inc.last_seen_ts


def _names(inc: Incident, module: str) -> bool:
    """Whether the incident holds a machine check naming this module, or one naming none."""
    modules = inc.details.get(CHECKED)
    return isinstance(modules, list) and (None in modules or module in modules)


def _verdict(storm: Storm) -> Verdict | None:
    """The rules' verdict on the module's sum, read as `explain` reads it."""
    last = storm.events[-1]
    event = Event.model_construct(
        ts=last.ts,
        node=storm.node,
        source="correlator",
        kind=EventKind.OTHER,
        gpu_uuid=None,
        pci_bus_id=None,
        job_id=None,
        code=None,
        severity=Severity.WARNING,
        message=over_threshold_message(storm.module, storm.count, storm.span),
        raw=last.raw,
        payload={},
        count=1,
        dedup_key=None,
    )
    return classify_event(event)
