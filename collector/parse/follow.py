"""Following a growing text file by offset: bounded reads, capped lines, truncation and rotation.

Shared by the job-log source (Slurm StdOut/StdErr files) and the kernel-log file fallback.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Protocol

from collector.health import SourceHealth
from collector.parse.common import MAX_LINE

Line = tuple[int | None, str]  # (byte offset of the line in its file when known, text)


class LineStream(Protocol):
    """A source of text lines (a followed file now; a Kubernetes pod log stream later)."""

    key: str

    def read_lines(self) -> list[Line]:
        """Complete lines that arrived since the last call; never raises for I/O trouble."""
        ...

    def close(self) -> None:
        """Release what the stream holds."""
        ...


class FileFollower:
    """Follows one file: reads at most `max_bytes` per call, cuts lines at `max_line` chars.

    A file that shrinks (truncated) is read again from 0; a file replaced under the same path
    (rotated) is drained to its end, then the new file is read from 0. A missing file is not an
    error (a job's output may not exist yet); other OS errors are counted in `health`.
    """

    def __init__(
        self,
        path: str,
        *,
        max_bytes: int = 8 * 1024 * 1024,
        max_line: int = MAX_LINE,
        tail_bytes: int | None = 16 * 1024 * 1024,
        health: SourceHealth | None = None,
        opener: Callable[[str], int] | None = None,
    ) -> None:
        self.key = path
        self.path = path
        self.max_bytes = max_bytes
        self.max_line = max_line
        self.tail_bytes = tail_bytes  # on first open of a big file, start this far from its end
        self.health = health
        self._open = opener or (lambda p: os.open(p, os.O_RDONLY))
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self.offset = 0  # of the next byte to read
        self._buf = b""
        self._buf_start = 0
        self._skipping = False  # inside an over-long line: drop bytes until its newline
        self.truncations = 0
        self.rotations = 0

    def read_lines(self) -> list[Line]:
        """New complete lines since the last call, with their byte offsets."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._drain_old() if self._fd is not None else []
        except OSError as exc:
            self._count("stat_failed", exc)
            return []
        out: list[Line] = []
        if self._fd is not None and self._ident != (st.st_dev, st.st_ino):
            out += self._drain_old()
            self.rotations += 1
        if self._fd is None and not self._reopen(st):
            return out
        if st.st_size < self.offset:
            self.truncations += 1
            self._seek(0)
        out += self._read(self.max_bytes)
        return out

    def close(self) -> None:
        """Close the file."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = None

    # --- internals --------------------------------------------------------------------------

    def _count(self, reason: str, exc: BaseException | None = None) -> None:
        if self.health is not None:
            self.health.error(reason, exc)

    def _reopen(self, st: os.stat_result) -> bool:
        try:
            self._fd = self._open(self.path)
        except OSError as exc:
            self._count("open_failed", exc)
            return False
        first = self._ident is None
        self._ident = (st.st_dev, st.st_ino)
        start = 0
        if first and self.tail_bytes is not None and st.st_size > self.tail_bytes:
            start = st.st_size - self.tail_bytes
            self._skipping = True  # the first line is likely cut: drop it
        self._seek(start)
        return True

    def _seek(self, pos: int) -> None:
        assert self._fd is not None
        os.lseek(self._fd, pos, os.SEEK_SET)
        self.offset = pos
        self._buf, self._buf_start = b"", pos
        if pos == 0:
            self._skipping = False

    def _drain_old(self) -> list[Line]:
        out = self._read(self.max_bytes)
        if self._buf and not self._skipping:  # the old file's last line had no newline
            out.append((self._buf_start, self._decode(self._buf)))
        self.close()
        self._buf, self._skipping = b"", False
        self.offset = 0
        return out

    def _read(self, budget: int) -> list[Line]:
        out: list[Line] = []
        while budget > 0 and self._fd is not None:
            try:
                chunk = os.read(self._fd, min(65536, budget))
            except OSError as exc:
                self._count("read_failed", exc)
                break
            if not chunk:
                break
            budget -= len(chunk)
            self.offset += len(chunk)
            out += self._split(chunk)
        return out

    def _split(self, chunk: bytes) -> list[Line]:
        out: list[Line] = []
        data = self._buf + chunk
        start = self._buf_start
        pos = 0
        while (nl := data.find(b"\n", pos)) != -1:
            if self._skipping:
                self._skipping = False
            else:
                out.append((start + pos, self._decode(data[pos:nl])))
            pos = nl + 1
        rest = data[pos:]
        if len(rest) > self.max_line and not self._skipping:
            out.append((start + pos, self._decode(rest[: self.max_line])))
            self._skipping = True
        self._buf = b"" if self._skipping else rest
        self._buf_start = start + pos if not self._skipping else start + len(data)
        return out

    def _decode(self, raw: bytes) -> str:
        return raw[: self.max_line].decode("utf-8", errors="replace").rstrip("\r")
