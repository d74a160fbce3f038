"""Kernel log source: /dev/kmsg (whole buffer since boot, then follow), with fallbacks.

At start it reads every record still in the kernel's ring buffer; the boot id and the last
sequence number handed on are kept in a small state file, so a restart repeats nothing. Then
it follows with non-blocking reads. Where /dev/kmsg is not readable (permission denied, absent)
it counts that and reads `journalctl -k -o short-iso` (cursor kept in the same state file) or a
log file (e.g. /var/log/kern.log) instead. PCI ids map to GPU UUID/index with what NVML said.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from collector.base import Emit, Observations, poll_until_stopped
from collector.health import SourceHealth
from collector.parse.follow import FileFollower
from collector.parse.kernel import GpuMap, KernelLogParser
from collector.slurm.runner import CommandRunner
from timeline.models import Event

_KMSG_HEAD = re.compile(rb"^(\d+),(\d+),(\d+),[^;]*;")
_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")
_CURSOR = "-- cursor: "


def default_boot_ts() -> float:
    """Epoch time of boot as this process sees it (wall clock minus CLOCK_MONOTONIC)."""
    return time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)


def _unescape(text: str) -> str:
    # /dev/kmsg escapes non-printable bytes as \xNN; NVRM's multi-line messages carry \x0a.
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text) if "\\x" in text else text


class _State:
    """boot id + last sequence handed on + journal cursor, in one small JSON file."""

    def __init__(self, path: Path | None, health: SourceHealth) -> None:
        self.path, self.health = path, health
        self.data: dict[str, object] = {}
        if path is not None and path.exists():
            try:
                loaded = json.loads(path.read_text())
                self.data = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError) as exc:
                health.error("state_unreadable", exc)

    def save(self, **values: object) -> None:
        """Store these values (atomically: temp file + rename), when they changed."""
        if all(self.data.get(k) == v for k, v in values.items()):
            return
        self.data.update(values)
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.data))
            os.replace(tmp, self.path)
        except OSError as exc:
            self.health.error("state_write_failed", exc)


class KmsgSource:
    """Kernel log as Events: polled `collect()` or streaming `run()` (use one, not both)."""

    name = "kmsg"

    def __init__(
        self,
        *,
        node: str,
        kmsg_path: str = "/dev/kmsg",
        boot_id_path: str = "/proc/sys/kernel/random/boot_id",
        state_path: Path | None = None,
        boot_ts: float | None = None,
        clock: Callable[[], float] = time.time,
        gpu_map: GpuMap | Callable[[], GpuMap] | None = None,
        journal_runner: CommandRunner | None = None,
        fallback_file: str | None = None,
        flood_window_s: float = 10.0,
        poll_s: float = 0.5,
        journal_every_s: float = 5.0,
        max_records: int = 100_000,
        health: SourceHealth | None = None,
        opener: Callable[[str, int], int] = os.open,
        reader: Callable[[int, int], bytes] = os.read,
    ) -> None:
        self.node, self.kmsg_path, self.clock = node, kmsg_path, clock
        self.health = health or SourceHealth("kmsg")
        self.state = _State(state_path, self.health)
        self.boot_ts = default_boot_ts() if boot_ts is None else boot_ts
        self.boot_id = self._read_boot_id(boot_id_path)
        # The first of a flood goes out at once; its repeats follow as one counted event.
        self.parser = KernelLogParser(
            node=node,
            boot_ts=self.boot_ts,
            flood_window_s=flood_window_s,
            gpu_map=gpu_map,
            emit_first=True,
        )
        self.journal_runner, self.fallback_file = journal_runner, fallback_file
        self.poll_s, self.max_records = poll_s, max_records
        self.journal_every_s = journal_every_s  # journalctl is a process: not every poll
        self._journal_at: float | None = None
        self._os_open, self._os_read = opener, reader
        self.mode = "kmsg"  # 'kmsg', 'journal', 'file' or 'none'
        self._fd: int | None = None
        self._pending = b""
        saved_boot = self.state.data.get("boot_id")
        saved_seq = self.state.data.get("seq")
        same_boot = saved_boot == self.boot_id and isinstance(saved_seq, int)
        self.done_seq: int = saved_seq if same_boot and isinstance(saved_seq, int) else -1
        self.last_seq = self.done_seq
        self._file: FileFollower | None = None
        self.records_read = 0
        self.overruns = 0

    # --- public -----------------------------------------------------------------------------

    def collect(self) -> Observations:
        """Read what is available now; return the events whose grouping/flood window closed."""
        events: list[Event] = []
        if self.mode == "kmsg":
            events += self._read_kmsg()
        if self.mode == "journal":
            now = self.clock()
            if self._journal_at is None or now - self._journal_at >= self.journal_every_s:
                self._journal_at = now
                events += self._read_journal()
        elif self.mode == "file":
            events += self._read_file()
        events += self.parser.tick(self.clock())
        self._checkpoint()
        return Observations(events=[self._keyed(e) for e in events])

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Follow until `stop` is set; on stop, release everything held and emit it."""
        poll_until_stopped(stop, collect=self.collect, emit=emit, interval_s=self.poll_s)
        final = [self._keyed(e) for e in self.parser.flush()]
        self._checkpoint()
        if final:
            emit(Observations(events=final))

    def close(self) -> None:
        """Close /dev/kmsg or the followed file."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._file is not None:
            self._file.close()

    # --- /dev/kmsg --------------------------------------------------------------------------

    def _read_boot_id(self, path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            self.health.error("boot_id_unreadable", exc)
            # Sequence numbers restart at each boot, so the boot must still be told apart: by
            # its boot time, to the minute (stable across agent restarts within one boot).
            return f"boot-{round(self.boot_ts / 60)}"

    def _open_kmsg(self) -> bool:
        try:
            self._fd = self._os_open(self.kmsg_path, os.O_RDONLY | os.O_NONBLOCK)
            return True
        except PermissionError as exc:
            self.health.error("kmsg_permission_denied", exc)
        except FileNotFoundError as exc:
            self.health.error("kmsg_not_found", exc)
        except OSError as exc:
            self.health.error("kmsg_open_failed", exc)
        self.mode = "journal" if self.journal_runner else ("file" if self.fallback_file else "none")
        return False

    def _read_kmsg(self) -> list[Event]:
        if self._fd is None and not self._open_kmsg():
            return []
        assert self._fd is not None
        events: list[Event] = []
        for _ in range(self.max_records):
            try:
                chunk = self._os_read(self._fd, 16384)
            except BlockingIOError:
                break  # caught up with the ring buffer
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    # The ring buffer overwrote records we had not read; the next read goes on.
                    self.overruns += 1
                    self.health.error("kmsg_overrun", exc)
                    continue
                self.health.error("kmsg_read_failed", exc)
                self.close()
                break
            if not chunk:
                break  # a regular file (tests, replays) at its end
            events += self._records(chunk)
        return events

    def _records(self, chunk: bytes) -> list[Event]:
        data = self._pending + chunk
        lines = data.split(b"\n")
        self._pending = lines.pop()  # a regular file may end mid-record
        if len(self._pending) > 65536:
            self.health.parse_failure(
                "kmsg_record_too_long", self._pending[:200].decode(errors="replace")
            )
            self._pending = b""
        events: list[Event] = []
        for raw in lines:
            if raw.startswith(b" "):
                continue  # a record's KEY=value dictionary line (SUBSYSTEM=, DEVICE=)
            m = _KMSG_HEAD.match(raw)
            if not m:
                if raw.strip():
                    self.health.parse_failure("kmsg_record", raw.decode(errors="replace"))
                continue
            seq = int(m.group(2))
            if seq <= self.done_seq:
                continue  # handed on before a restart
            self.last_seq = max(self.last_seq, seq)
            self.records_read += 1
            events += self._feed_record(raw.decode("utf-8", errors="replace"), seq)
        return events

    def _feed_record(self, record: str, seq: int) -> list[Event]:
        head, _, text = record.partition(";")
        first, *more = _unescape(text).split("\n")
        events = self.parser.feed(f"{head};{first}", seq=seq)
        for cont in more:
            if cont.strip():
                events += self.parser.feed(" " + cont)
        return events

    def _checkpoint(self) -> None:
        if self.mode != "kmsg":
            return
        held = self.parser.held_min_seq()
        done = self.last_seq if held is None else min(self.last_seq, held - 1)
        if done > self.done_seq:
            self.done_seq = done
        self.state.save(boot_id=self.boot_id, seq=self.done_seq)

    def _keyed(self, ev: Event) -> Event:
        seq = ev.payload.get("seq")
        if isinstance(seq, int):
            ev.dedup_key = f"{self.boot_id}:{seq}" + (
                ":repeats" if ev.payload.get("repeat") else ""
            )
        else:
            digest = hashlib.sha1(f"{self.node}|{ev.raw}".encode(), usedforsecurity=False)
            ev.dedup_key = "line:" + digest.hexdigest()
        return ev

    # --- fallbacks --------------------------------------------------------------------------

    def _read_journal(self) -> list[Event]:
        assert self.journal_runner is not None
        argv = ["journalctl", "-k", "-o", "short-iso", "--no-pager", "--show-cursor"]
        cursor = self.state.data.get("journal_cursor")
        argv += [f"--after-cursor={cursor}"] if isinstance(cursor, str) else ["-b"]
        result = self.journal_runner(argv, 30.0)
        if not result.ok:
            self.health.error(f"journalctl_{result.error}")
            return []
        events: list[Event] = []
        for line in result.stdout.splitlines():
            if line.startswith(_CURSOR):
                self.state.save(journal_cursor=line[len(_CURSOR) :].strip())
            elif line.startswith("-- "):
                continue  # "-- No entries --", "-- Boot ... --"
            else:
                events += self.parser.feed(line)
        return events

    def _read_file(self) -> list[Event]:
        assert self.fallback_file is not None
        if self._file is None:
            self._file = FileFollower(self.fallback_file, health=self.health)
        events: list[Event] = []
        for _, line in self._file.read_lines():
            events += self.parser.feed(line)
        return events
