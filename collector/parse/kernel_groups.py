"""Multi-line kernel messages being put together: AER detail lines under their header, SXid
Severity/Data lines under their Fatal/Non-fatal line, an OOM-killer episode's lines.

Several groups can be open at once (NVSwitches interleave their lines); a line that belongs to
none of them closes them all, as does a run of unrelated lines or time passing.
"""

from __future__ import annotations

from collections import OrderedDict

from collector.parse.common import join_raw
from timeline.models import Event, EventKind

GROUPED = (EventKind.PCIE_AER, EventKind.SXID, EventKind.HOST_OOM)
_OOM_SKIP = ("stage", "text", "seq", "uptime_s", "syslog_level")


def _key(ev: Event) -> tuple[object, ...]:
    if ev.kind is EventKind.PCIE_AER:
        return ("aer", ev.payload.get("reporter"))
    if ev.kind is EventKind.SXID:
        return ("sxid", ev.code, ev.pci_bus_id)
    # One OOM episode per host: a syslog that several hosts wrote interleaves their episodes.
    return ("oom", (ev.node or "").lower())


class OpenGroups:
    """The groups open now, oldest first; bounded by `max_open`."""

    def __init__(self, *, max_open: int = 64) -> None:
        self.max_open = max_open
        self._open: OrderedDict[tuple[object, ...], Event] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self._open)

    def events(self) -> list[Event]:
        """The group events still open (not yet released)."""
        return list(self._open.values())

    def place(self, ev: Event) -> tuple[bool, list[Event]]:
        """Take `ev` into a group (True) or not (False); also return groups this closed."""
        if ev.kind not in GROUPED:
            return False, self.close_all()
        key = self._find(ev)
        if key is not None:
            self._merge(self._open[key], ev)
            if ev.payload.get("stage") == "reaped":
                return True, [self._open.pop(key)]
            return True, []
        if ev.payload.get("detail"):
            return False, []  # a follow-on line whose header we never saw stands alone
        closed = [self._open.pop(_key(ev))] if _key(ev) in self._open else []
        self._open[_key(ev)] = ev
        while len(self._open) > self.max_open:
            closed.append(self._open.popitem(last=False)[1])
        return True, closed

    def close_all(self) -> list[Event]:
        """Close every open group."""
        out = list(self._open.values())
        self._open.clear()
        return out

    def close_older_than(self, ts: float) -> list[Event]:
        """Close the groups whose first line is older than `ts`."""
        old = [k for k, g in self._open.items() if g.ts < ts]
        return [self._open.pop(k) for k in old]

    def _find(self, ev: Event) -> tuple[object, ...] | None:
        if ev.kind is EventKind.HOST_OOM:
            key = _key(ev)
            return key if key in self._open and ev.payload.get("stage") != "invoked" else None
        if not ev.payload.get("detail"):
            return None
        if ev.kind is EventKind.SXID:
            return _key(ev) if _key(ev) in self._open else None
        reporter = ev.payload.get("reporter")
        for key in reversed(self._open):
            g = self._open[key]
            if g.kind is EventKind.PCIE_AER and reporter in (
                g.payload.get("reporter"),
                g.payload.get("source"),
            ):
                return key
        return None

    @staticmethod
    def _merge(g: Event, ev: Event) -> None:
        g.raw = join_raw(g.raw, ev.raw or "")
        if ev.kind is not EventKind.HOST_OOM:
            g.payload.setdefault("details", []).append(ev.payload.get("text"))
            return
        stages = g.payload.setdefault("stages", [g.payload.get("stage")])
        stages.append(ev.payload.get("stage"))
        for k, v in ev.payload.items():
            if k not in _OOM_SKIP:
                g.payload.setdefault(k, v)
        if ev.payload.get("stage") == "killed":
            g.message = ev.message
        g.job_id = g.job_id or ev.job_id
