"""Kernel log parsing: one line (`parse_kernel_line`) or a whole text (`parse_kernel_text`).

The stateful `KernelLogParser` adds what one line cannot show: multi-line messages (the
"fallen off the bus" block with no Xid, AER detail lines, SXid data lines, an OOM-killer
episode, a firmware-first GHES record's "{N}[Hardware Error]: " lines: kernel_ghes.py), the
GPU UUID the driver printed for a PCI id, and flood collapsing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from collector.parse.common import (
    MAX_MESSAGE,
    MAX_RAW,
    FloodCollapser,
    cap,
    clean_line,
    fit_payload,
)
from collector.parse.common import normalize_pci_bus_id as _norm
from collector.parse.kernel_edac import edac_ce
from collector.parse.kernel_ghes import ghes_record, record_of
from collector.parse.kernel_groups import GROUPED, OpenGroups
from collector.parse.kernel_host import aer, oom
from collector.parse.kernel_node import WORTH_A_LOOK as _NODE_WORTH
from collector.parse.kernel_node import node_fault
from collector.parse.kernel_prefix import KernelLine, split_kernel_line
from collector.parse.kernel_rules import RECOGNIZERS, Match
from collector.parse.transcribe import transcribed
from timeline.models import Event, EventKind

GpuMap = Mapping[str, tuple[str, int]]  # canonical PCI id -> (GPU UUID, index), as NVML reported

_WORTH_A_LOOK = re.compile(
    r"NVRM|SXid|nvlink|AER|PCIe Bus Error|error status/mask|oom|Out of memory|Memory cgroup|"
    r"Task in |\]\s\w",
    re.I,
)
_GPU_AT = re.compile(r"NVRM: GPU at (?:PCI:)?(?P<pci>[0-9a-fA-F:.]+): (?P<uuid>GPU-[0-9a-fA-F-]+)")
_SERIAL = re.compile(r"NVRM: GPU Board Serial Number: (?P<serial>\S+)")
_THE_GPU = re.compile(r"NVRM: The NVIDIA GPU [0-9a-fA-F:.]+(?: \(PCI ID: [0-9a-fA-F:]+\))?\s*$")
_GROUP_MAX_LINES = 1000  # an OOM episode's memory dump is long; stop waiting after this
_GHES_IDLE_LINES = 20  # other lines after which an open GHES record is taken as complete


def classify_kernel_message(message: str) -> Match | None:
    """Recognize one kernel message (no time prefix); None for lines that matter to no one."""
    if not (_WORTH_A_LOOK.search(message) or _NODE_WORTH.search(message)):
        return None
    if (ghes := record_of(message)) is not None:  # one line of a GHES record, read alone
        return ghes_record([ghes[1]])
    for rec in (*RECOGNIZERS, aer, oom, node_fault, edac_ce):
        if (m := rec(message)) is not None:
            return m
    return None


def _event(
    kl: KernelLine, m: Match, raw: str, *, node: str | None, ts: float | None, source: str
) -> Event:
    payload: dict[str, Any] = dict(m.payload)
    if m.pci_raw:
        payload["pci_raw"] = m.pci_raw
    for key, value in (("uptime_s", kl.uptime_s), ("seq", kl.seq), ("syslog_level", kl.level)):
        if value is not None:
            payload[key] = value
    when = kl.ts if kl.ts is not None else ts
    if when is None:
        # No absolute time in the line and none given: keep order by uptime, and say so.
        when = kl.uptime_s or 0.0
        payload["ts_is_uptime"] = True
    return Event(
        ts=when,
        node=node or kl.host,
        source=source,
        kind=m.kind,
        pci_bus_id=m.pci_bus_id,
        job_id=payload.get("job_id"),
        code=m.code,
        severity=m.severity,
        message=cap(m.message, MAX_MESSAGE),
        raw=cap(raw.rstrip("\r\n"), MAX_RAW),
        payload=fit_payload(payload),
    )


def parse_kernel_line(
    line: str,
    *,
    node: str | None = None,
    boot_ts: float | None = None,
    ts: float | None = None,
    year: int | None = None,
    source: str = "kmsg",
) -> Event | None:
    """One kernel log line (dmesg, /dev/kmsg, journalctl, syslog) -> Event, or None.

    `boot_ts` turns uptime stamps into epoch time; `ts` is used when the line has no time.
    """
    line = clean_line(line)
    kl = split_kernel_line(transcribed(line), boot_ts=boot_ts, year=year)  # raw stays `line`
    m = classify_kernel_message(kl.message)
    if m is None:
        return None
    return _event(kl, m, line, node=node, ts=ts, source=source)


class KernelLogParser:
    """Feeds lines one at a time; returns Events as multi-line groups and flood windows close."""

    def __init__(
        self,
        *,
        node: str | None = None,
        boot_ts: float | None = None,
        year: int | None = None,
        source: str = "kmsg",
        flood_window_s: float = 300.0,
        max_flood_keys: int = 4096,
        gpu_map: GpuMap | Callable[[], GpuMap] | None = None,
        emit_first: bool = False,
    ) -> None:
        self.node, self.boot_ts, self.year, self.source = node, boot_ts, year, source
        self._flood = FloodCollapser(
            window_s=flood_window_s, max_keys=max_flood_keys, emit_first=emit_first
        )
        self._gpu_map = gpu_map
        self.uuid_by_pci: dict[str, str] = {}  # learned from "NVRM: GPU at PCI:...: GPU-..." lines
        self.serial_by_pci: dict[str, str] = {}  # from the "GPU Board Serial Number" line after it
        self._serial_pci: str | None = None
        self._groups = OpenGroups()  # multi-line AER / SXid / OOM messages being put together
        self._idle_lines = 0
        self._head: list[tuple[KernelLine, str]] = []  # "NVRM: The NVIDIA GPU ..." block so far
        # the open GHES record's lines: (line, raw, record number, body); its first line's ts
        self._ghes: list[tuple[KernelLine, str, int, str]] = []
        self._ghes_ts: float | None = None
        self._ghes_idle = 0
        # last (host, message) -> its flood key
        self._last: tuple[tuple[str | None, str], tuple[object, ...]] | None = None

    def feed(self, line: str, *, ts: float | None = None, seq: int | None = None) -> list[Event]:
        """Parse one line; `ts`/`seq` override what the line states (kmsg reader knows better)."""
        line = clean_line(line)
        # the rules read the line as printed (transcribe.py); the event's raw stays `line`
        kl = split_kernel_line(transcribed(line), boot_ts=self.boot_ts, year=self.year)
        if ts is not None or seq is not None:
            kl = KernelLine(
                kl.message,
                ts if ts is not None else kl.ts,
                kl.uptime_s,
                kl.host,
                seq if seq is not None else kl.seq,
                kl.level,
                kl.continuation,
            )
        out: list[Event] = []
        if self._last is not None and self._last[0] == (kl.host, kl.message) and not self._head:
            # A flood repeats one message: count it without parsing it again. The same message
            # from another syslog host (RFC 3164 4.1.2 HOSTNAME) is that host's own event, as
            # FloodCollapser.key (which holds the node) would count it: two nodes' Xid 48 are
            # not one node's flood.
            when = kl.ts if kl.ts is not None else (ts if ts is not None else kl.uptime_s or 0.0)
            counted, out = self._flood.bump(self._last[1], when)
            if counted:
                return [self._finish(e) for e in out]
        self._last = None
        if self._head:
            done = self._feed_head(kl, line, out)
            if done:
                return out
        if (ghes := record_of(kl.message)) is not None:
            out += self._feed_ghes(kl, line, ghes, ts)
            return out
        if self._ghes:  # other CPUs' lines may fall between a record's lines
            self._ghes_idle += 1
            if self._ghes_idle > _GHES_IDLE_LINES:
                out += self._close_ghes()
        if _THE_GPU.search(kl.message):
            self._head = [(kl, line)]
            return out
        self._learn_identity(kl.message)
        m = classify_kernel_message(kl.message)
        if m is None:
            self._idle_lines += 1
            if self._groups and self._idle_lines > _GROUP_MAX_LINES:
                out += self._release(self._groups.close_all())
            return out
        ev = _event(kl, m, line, node=self.node, ts=ts, source=self.source)
        out += self._place(ev)
        if not self._groups and ev.kind not in GROUPED:
            self._last = ((kl.host, kl.message), FloodCollapser.key(ev))
        return out

    def tick(self, now: float, *, group_grace_s: float = 2.0) -> list[Event]:
        """Release what waited long enough by `now` (streaming use); floods wait a window."""
        out: list[Event] = []
        if self._ghes and (self._ghes_ts or 0.0) < now - group_grace_s:
            out += self._close_ghes()
        out += self._release(self._groups.close_older_than(now - group_grace_s))
        out += [self._finish(e) for e in self._flood.release_older_than(now - self._flood.window_s)]
        return out

    def flush(self) -> list[Event]:
        """Release everything still held (end of text, or shutdown)."""
        out: list[Event] = []
        if self._head:
            self._head = []
        out += self._close_ghes()
        out += self._release(self._groups.close_all())
        out += [self._finish(e) for e in self._flood.flush()]
        return out

    def held_min_seq(self) -> int | None:
        """Smallest kmsg sequence number among events not yet released (for safe checkpoints)."""
        held = self._flood.held_events() + self._groups.events()
        seqs = [e.payload["seq"] for e in held if isinstance(e.payload.get("seq"), int)]
        heads = [kl.seq for kl, _ in self._head if kl.seq is not None]
        heads += [kl.seq for kl, *_ in self._ghes[:1] if kl.seq is not None]
        return min(seqs + heads, default=None)

    # --- internals --------------------------------------------------------------------------

    def _feed_head(self, kl: KernelLine, line: str, out: list[Event]) -> bool:
        first = self._head[0][0]
        # A line that is an event of its own (an Xid printed right after) never joins the block.
        follows = kl.continuation or (
            kl.message.startswith("NVRM:")
            and (kl.uptime_s is None or kl.uptime_s == first.uptime_s)
            and classify_kernel_message(kl.message) is None
        )
        if not follows:
            self._head = []
            return False
        self._head.append((kl, line))
        joined = " ".join(k.message for k, _ in self._head)
        m = classify_kernel_message(joined)
        if m is not None and m.kind is EventKind.GPU_LOST:
            raw = "\n".join(r.rstrip("\r\n") for _, r in self._head)
            out += self._place(
                _event(first, m, raw, node=self.node, ts=first.ts, source=self.source)
            )
            self._head = []
        elif len(self._head) >= 4:
            self._head = []
        return True

    def _feed_ghes(
        self, kl: KernelLine, line: str, ghes: tuple[int, str], ts: float | None
    ) -> list[Event]:
        """Add one line to the open GHES record, or close it and open another: the lines of one
        record share its number (ghes.c __ghes_print_estatus "{%u}") and its host; a header
        line starts a new record even under a number seen before (the count restarts at boot)."""
        rec, body = ghes
        out: list[Event] = []
        if self._ghes:
            first, _, open_rec, _ = self._ghes[0]
            if rec != open_rec or kl.host != first.host or body.startswith("Hardware error"):
                out = self._close_ghes()
        if not self._ghes:
            when = kl.ts if kl.ts is not None else ts
            self._ghes_ts = when if when is not None else kl.uptime_s
        self._ghes.append((kl, line, rec, body))
        self._ghes_idle = 0
        if len(self._ghes) >= _GROUP_MAX_LINES:
            out += self._close_ghes()
        return out

    def _close_ghes(self) -> list[Event]:
        """The open GHES record as one event (kernel_ghes.ghes_record), if one is open."""
        if not self._ghes:
            return []
        lines, ts, self._ghes, self._ghes_ts = self._ghes, self._ghes_ts, [], None
        m = ghes_record([body for *_, body in lines])
        if m is None:
            return []
        raw = "\n".join(r.rstrip("\r\n") for _, r, *_ in lines)
        ev = _event(lines[0][0], m, raw, node=self.node, ts=ts, source=self.source)
        return self._place(ev)

    def _learn_identity(self, message: str) -> None:
        if m := _GPU_AT.search(message):
            pci = _norm(m["pci"])
            if pci:
                self.uuid_by_pci[pci] = m["uuid"]
                self._serial_pci = pci
        elif (m := _SERIAL.search(message)) and self._serial_pci:
            self.serial_by_pci[self._serial_pci] = m["serial"]
            self._serial_pci = None

    def _place(self, ev: Event) -> list[Event]:
        self._idle_lines = 0
        taken, closed = self._groups.place(ev)
        out = self._release(closed)
        if not taken:
            out += [self._finish(e) for e in self._flood.add(ev)]
        return out

    def _release(self, groups: list[Event]) -> list[Event]:
        return [self._finish(e) for g in groups for e in self._flood.add(g)]

    def _finish(self, ev: Event) -> Event:
        if ev.pci_bus_id and not ev.gpu_uuid:
            gmap = self._gpu_map() if callable(self._gpu_map) else self._gpu_map
            if gmap and ev.pci_bus_id in gmap:
                ev.gpu_uuid, ev.payload["gpu_index"] = gmap[ev.pci_bus_id]
            elif ev.pci_bus_id in self.uuid_by_pci:
                ev.gpu_uuid = self.uuid_by_pci[ev.pci_bus_id]
        if ev.pci_bus_id in self.serial_by_pci:
            ev.payload.setdefault("gpu_serial", self.serial_by_pci[ev.pci_bus_id])
        return ev


def parse_kernel_text(
    text: str,
    *,
    node: str | None = None,
    boot_ts: float | None = None,
    year: int | None = None,
    source: str = "kmsg",
    flood_window_s: float = 300.0,
) -> list[Event]:
    """A whole kernel log -> Events in time order, multi-line forms joined, floods collapsed."""
    parser = KernelLogParser(
        node=node, boot_ts=boot_ts, year=year, source=source, flood_window_s=flood_window_s
    )
    out: list[Event] = []
    for line in text.splitlines():
        out += parser.feed(line)
    out += parser.flush()
    out.sort(key=lambda e: e.ts)
    return out
