"""Read a W&B run's transaction log (`run-<id>.wandb`) incrementally into a RunStatus.

The records are the wandb library's own protobuf messages (`wandb.proto.wandb_internal_pb2.Record`)
and are decoded by it. The installed wandb (0.31) ships no Python reader for the file any more (its
writer is the Go `wandb-core`), so the thin framing around the records is read here. It is the
LevelDB log format: a 7-byte file header `:W&B` + 0xBEE1 + version 0, then 32 KiB blocks of chunks,
each with a 7-byte header (CRC-32 of type byte + data, length, type FULL/FIRST/MIDDLE/LAST).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class RunStatus:
    """What one W&B run says about itself: identity, link to a job, last step, finished or not."""

    run_id: str | None = None
    entity: str | None = None
    project: str | None = None
    host: str | None = None
    start_ts: float | None = None
    config_links: dict[str, str] = field(default_factory=dict)  # slurm_job_id, k8s_pod, ...
    checkpoint_dir: str | None = None  # config `checkpoint_dir`: where the healer looks
    slurm_job_id: str | None = None  # written by wandb itself from SLURM_JOB_ID
    last_step: int | None = None
    last_step_ts: float | None = None
    last_record_ts: float | None = None  # newest time any record shows (history, system stats)
    file_mtime: float | None = None  # when wandb last flushed the run file (offline dirs only)
    finished: bool = False
    exit_code: int | None = None
    state: str = "running"  # running | finished | failed (online runs: W&B's own state word)

    @property
    def path(self) -> str:
        """entity/project/run_id as W&B names runs (entity empty for offline runs)."""
        return f"{self.entity or ''}/{self.project or ''}/{self.run_id or ''}"


LINK_KEYS = ("slurm_job_id", "SLURM_JOB_ID", "k8s_pod", "fleetmedic_job_id")
CHECKPOINT_KEYS = ("checkpoint_dir", "fleetmedic_checkpoint_dir")


def _note_config(status: RunStatus, key: str, value_json: str) -> None:
    if key not in LINK_KEYS and key not in CHECKPOINT_KEYS:
        return
    try:
        value = json.loads(value_json)
    except ValueError:
        return
    if key in CHECKPOINT_KEYS:
        if isinstance(value, str) and value:
            status.checkpoint_dir = value[:1024]
    elif isinstance(value, str | int) and str(value):
        status.config_links[key] = str(value)


def _history(status: RunStatus, items: Any, step_num: int | None) -> None:
    step, ts = step_num, None
    for item in items:
        key = item.key or "/".join(item.nested_key)
        if key == "_step":
            step = int(json.loads(item.value_json))
        elif key == "_timestamp":
            ts = float(json.loads(item.value_json))
    _seen_at(status, ts)
    if step is not None and (status.last_step is None or step >= status.last_step):
        status.last_step = step
        status.last_step_ts = ts if ts is not None else status.last_step_ts


def _seen_at(status: RunStatus, ts: float | None) -> None:
    if ts is not None and (status.last_record_ts is None or ts > status.last_record_ts):
        status.last_record_ts = ts


def apply_record(status: RunStatus, record: Any) -> None:
    """Fold one wandb Record into the status; unknown record types are ignored."""
    kind = record.WhichOneof("record_type")
    if kind == "run":
        run = record.run
        status.run_id = run.run_id or status.run_id
        status.entity = run.entity or status.entity
        status.project = run.project or status.project
        status.host = run.host or status.host
        if run.HasField("start_time"):
            status.start_ts = run.start_time.seconds + run.start_time.nanos / 1e9
        for item in run.config.update:
            _note_config(status, item.key, item.value_json)
    elif kind == "config":
        for item in record.config.update:
            _note_config(status, item.key, item.value_json)
    elif kind == "environment":
        env = record.environment
        status.slurm_job_id = env.slurm.get("job_id") or status.slurm_job_id
        status.host = env.host or status.host
    elif kind == "history":
        has_step = record.history.HasField("step")
        _history(status, record.history.item, record.history.step.num if has_step else None)
    elif kind == "stats":
        # wandb-core samples system metrics every ~15 s even while the script is blocked, so
        # these prove the run was alive at that time (with or without steps).
        stamp = record.stats.timestamp
        _seen_at(status, stamp.seconds + stamp.nanos / 1e9)
    elif kind == "exit":
        status.finished = True
        status.exit_code = record.exit.exit_code
        status.state = "finished" if record.exit.exit_code == 0 else "failed"


@dataclass
class RunFile:
    """A .wandb file read so far: byte offset after the last whole record, and the status."""

    path: Path
    offset: int = 0
    status: RunStatus = field(default_factory=RunStatus)


def _chunks(data: bytes, start: int) -> Iterator[tuple[int, int, bytes, bool]]:
    """(type, end offset, payload, crc ok) of each chunk from `start`; stops at a torn chunk."""
    pos = start
    while pos + CHUNK_HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:  # the writer pads a block's tail shorter than a header
            pos += left
            continue
        crc, length, ctype = struct.unpack_from("<IHB", data, pos)
        end = pos + CHUNK_HEADER + length
        if (ctype == 0 and length == 0) or end > len(data):
            return  # zero fill or a chunk still being written
        payload = data[pos + CHUNK_HEADER : end]
        ok = zlib.crc32(payload, zlib.crc32(bytes([ctype]))) & 0xFFFFFFFF == crc
        yield ctype, end, payload, ok
        pos = end


def read_new_records(
    run: RunFile, record_factory: Callable[[], Any], on_bad: Callable[[str, str], None]
) -> int:
    """Read the records appended since the last call into run.status; returns how many."""
    with run.path.open("rb") as fh:
        if run.offset:
            fh.seek(run.offset - run.offset % BLOCK)
            base = run.offset - run.offset % BLOCK
        else:
            base = 0
        data = fh.read()
    if base == 0:
        if len(data) < len(FILE_HEADER):
            return 0
        if data[: len(FILE_HEADER)] != FILE_HEADER:
            on_bad("wandb_header", str(run.path))
            run.offset = -1  # never read this file again
            return 0
    start = max(run.offset, len(FILE_HEADER)) - base
    parts: list[bytes] = []
    count = 0
    for ctype, end, payload, ok in _chunks(data, start):
        if not ok:
            on_bad("wandb_crc", f"{run.path}@{base + end}")
            parts = []
            run.offset = base + end
            continue
        parts = [payload] if ctype in (FULL, FIRST) else [*parts, payload]
        if ctype not in (FULL, LAST):
            continue
        record = record_factory()
        try:
            record.ParseFromString(b"".join(parts))
            apply_record(run.status, record)
            count += 1
        except Exception as exc:  # a record wandb itself could not decode: count, go on
            on_bad("wandb_record", f"{run.path}: {exc}")
        parts = []
        run.offset = base + end
    return count
