"""The agent's durable local spool: an SQLite file every observation is written to first.

put() commits before it returns, so a SIGKILL loses nothing that was accepted. take() forms a
batch from the oldest items and persists its batch_id in the same transaction; until that batch
is acked (or split/quarantined) take() hands back the very same batch, so a re-send after a
crash carries the same batch_id and the server stores it once.

Items the server will never take go to the dead-letter table one by one, with the server's
answer: those it rejected in an accepted batch (ack), and a batch isolated down to one item
(quarantine). Nothing leaves the spool any other way, so nothing is lost silently.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collector.base import Observations

# Order matters: it is the key order of the ingest body (timeline.models.Batch).
KINDS = ("gpus", "samples", "events", "jobs", "allocations", "nodes", "job_patches")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    nbytes INTEGER NOT NULL,
    batch_id TEXT
);
CREATE INDEX IF NOT EXISTS ix_items_batch ON items (batch_id, seq);
CREATE INDEX IF NOT EXISTS ix_items_kind ON items (kind, batch_id, seq);
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY,
    created_ts REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS dead_items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    batch_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    ts REAL NOT NULL,
    status INTEGER,
    detail TEXT,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""


@dataclass
class SpoolBatch:
    """A batch formed from spooled items: its persisted id and the items' JSON texts by kind."""

    batch_id: str
    items: dict[str, list[str]] = field(default_factory=dict)
    nbytes: int = 0

    def size(self) -> int:
        """Number of items of every kind together."""
        return sum(len(v) for v in self.items.values())

    def body(self, *, agent: str, node: str) -> bytes:
        """The ingest request body (a timeline.models.Batch), built without re-parsing items."""
        head = json.dumps({"agent": agent, "node": node, "batch_id": self.batch_id})[:-1]
        parts = [head]
        for kind in KINDS:
            parts.append(f',"{kind}":[' + ",".join(self.items.get(kind, [])) + "]")
        parts.append("}")
        return "".join(parts).encode()


class Spool:
    """A bounded, crash-safe FIFO of observations in one SQLite file; thread-safe."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_rows: int = 1_000_000,
        max_bytes: int = 512 * 1024 * 1024,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: an fsync per commit; a put per poll interval is cheap, and a power cut keeps data.
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(batches)")}
        if "failures" not in columns:  # a spool written by an older agent
            self._db.execute("ALTER TABLE batches ADD COLUMN failures INTEGER NOT NULL DEFAULT 0")
        self._rows, self._bytes = self._db.execute(
            "SELECT count(*), coalesce(sum(nbytes), 0) FROM items"
        ).fetchone()

    def close(self) -> None:
        """Close the file; everything put is already committed."""
        with self._lock:
            self._db.close()

    def put(self, obs: Observations) -> int:
        """Write observations durably (committed on return); returns the number of items."""
        rows: list[tuple[str, str, int]] = []
        for kind in KINDS:
            for item in getattr(obs, kind):
                text = item.model_dump_json(exclude_none=True)
                rows.append((kind, text, len(text)))
        if not rows:
            return 0
        with self._lock, self._tx():
            self._db.executemany("INSERT INTO items (kind, body, nbytes) VALUES (?, ?, ?)", rows)
            for kind in KINDS:
                n = sum(1 for r in rows if r[0] == kind)
                if n:
                    self._bump(f"produced_{kind}", n)
            self._rows += len(rows)
            self._bytes += sum(r[2] for r in rows)
            self._enforce_bounds()
        return len(rows)

    def take(self, *, max_items: int = 5000, max_bytes: int = 4 * 1024 * 1024) -> SpoolBatch | None:
        """The oldest pending batch, or a new one formed from the oldest unbatched items."""
        with self._lock:
            row = self._db.execute(
                "SELECT batch_id FROM batches ORDER BY created_ts, rowid LIMIT 1"
            ).fetchone()
            if row is not None:
                self._db.execute(
                    "UPDATE batches SET attempts = attempts + 1 WHERE batch_id = ?", row
                )
                return self._load(row[0])
            picked = self._oldest_unbatched(max_items, max_bytes)
            if not picked:
                return None
            batch_id = uuid.uuid4().hex
            with self._tx():
                self._db.execute(
                    "INSERT INTO batches (batch_id, created_ts, attempts) VALUES (?, ?, 1)",
                    (batch_id, self._clock()),
                )
                self._db.executemany(
                    "UPDATE items SET batch_id = ? WHERE seq = ?", [(batch_id, s) for s in picked]
                )
            return self._load(batch_id)

    def ack(
        self, batch_id: str, *, rejected: Mapping[tuple[str, int], tuple[int, str]] | None = None
    ) -> int:
        """The server stored (or already had) this batch: delete its items. Returns how many.

        `rejected` maps (kind, index in that kind's list) to the server's (status, reason) for
        items it left out; they go to the dead letters instead.
        """
        rejected = rejected or {}
        with self._lock, self._tx():
            batch = self._load(batch_id)
            dead = [
                (batch_id, kind, self._clock(), status, detail[:4096], batch.items[kind][i])
                for (kind, i), (status, detail) in rejected.items()
                if i < len(batch.items.get(kind, []))
            ]
            self._dead_letter(dead)
            self._db.execute("DELETE FROM items WHERE batch_id = ?", (batch_id,))
            self._db.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))
            for kind, bodies in batch.items.items():
                delivered = len(bodies) - sum(1 for d in dead if d[1] == kind)
                if delivered:
                    self._bump(f"delivered_{kind}", delivered)
            self._rows -= batch.size()
            self._bytes -= batch.nbytes
            return batch.size() - len(dead)

    def record_failure(self, batch_id: str) -> int:
        """Count one more server error for this batch; returns its count so far."""
        with self._lock, self._tx():
            self._db.execute(
                "UPDATE batches SET failures = failures + 1 WHERE batch_id = ?", (batch_id,)
            )
            row = self._db.execute(
                "SELECT failures FROM batches WHERE batch_id = ?", (batch_id,)
            ).fetchone()
        return int(row[0]) if row else 0

    def split(self, batch_id: str) -> list[str]:
        """Replace a batch the server refused as too large by two halves (new ids, persisted)."""
        with self._lock, self._tx():
            seqs = [
                r[0]
                for r in self._db.execute(
                    "SELECT seq FROM items WHERE batch_id = ? ORDER BY seq", (batch_id,)
                )
            ]
            if len(seqs) < 2:
                return [batch_id]
            self._db.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))
            half = len(seqs) // 2
            now = self._clock()
            new_ids = []
            for part in (seqs[:half], seqs[half:]):
                new_id = uuid.uuid4().hex
                new_ids.append(new_id)
                self._db.execute(
                    "INSERT INTO batches (batch_id, created_ts) VALUES (?, ?)", (new_id, now)
                )
                self._db.executemany(
                    "UPDATE items SET batch_id = ? WHERE seq = ?", [(new_id, s) for s in part]
                )
            self._bump("split_batches", 1)
            return new_ids

    def quarantine(self, batch_id: str, *, status: int | None, detail: str) -> int:
        """Move a batch the server will never accept, item by item, to the dead letters."""
        with self._lock, self._tx():
            if not self._db.execute(
                "SELECT 1 FROM batches WHERE batch_id = ?", (batch_id,)
            ).fetchone():
                return 0
            batch = self._load(batch_id)
            now = self._clock()
            self._dead_letter(
                [
                    (batch_id, kind, now, status, detail[:4096], body)
                    for kind, bodies in batch.items.items()
                    for body in bodies
                ]
            )
            self._db.execute("DELETE FROM items WHERE batch_id = ?", (batch_id,))
            self._db.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))
            self._bump("quarantined_batches", 1)
            self._bump("quarantined_items", batch.size())
            self._rows -= batch.size()
            self._bytes -= batch.nbytes
        return batch.size()

    def counters(self) -> dict[str, int]:
        """Monotonic counters: produced_/delivered_<kind>, dropped_samples, quarantined_*,
        dead_lettered_items, split_batches."""
        with self._lock:
            return dict(self._db.execute("SELECT name, value FROM counters").fetchall())

    def pending(self) -> int:
        """Items not yet acked (batched or not)."""
        with self._lock:
            return int(self._rows)

    def pending_batch_ids(self) -> list[str]:
        """Ids of formed, unacked batches, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT batch_id FROM batches ORDER BY created_ts, rowid")
            return [r[0] for r in rows]

    def dead_letters(self) -> list[dict[str, object]]:
        """The items the server will never take, oldest first, with its answer (and whole
        batches an older agent quarantined in this file, as kind "batch")."""
        keys = ("batch_id", "kind", "ts", "status", "detail", "body")
        with self._lock:
            rows = list(
                self._db.execute(
                    "SELECT batch_id, kind, ts, status, detail, body FROM dead_items ORDER BY id"
                )
            )
            legacy = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'dead_letter'"
            ).fetchone()
            if legacy:
                rows = (
                    list(
                        self._db.execute(
                            "SELECT batch_id, 'batch', ts, status, detail, body FROM dead_letter "
                            "ORDER BY ts"
                        )
                    )
                    + rows
                )
        return [dict(zip(keys, r, strict=True)) for r in rows]

    # --- internals (callers hold self._lock) ---

    def _tx(self) -> _Transaction:
        return _Transaction(self._db)

    def _dead_letter(self, rows: Sequence[tuple[str, str, float, int | None, str, str]]) -> None:
        if rows:
            self._db.executemany(
                "INSERT INTO dead_items (batch_id, kind, ts, status, detail, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._bump("dead_lettered_items", len(rows))

    def _bump(self, name: str, n: int) -> None:
        self._db.execute(
            "INSERT INTO counters (name, value) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
            (name, n),
        )

    def _enforce_bounds(self) -> None:
        """Over the bounds, drop the oldest unbatched samples; events and the rest are kept."""
        while self._rows > self.max_rows or self._bytes > self.max_bytes:
            over_rows = max(self._rows - self.max_rows, 0)
            chunk = over_rows if over_rows > 0 else 100
            victims = self._db.execute(
                "SELECT seq, nbytes FROM items WHERE kind = 'samples' AND batch_id IS NULL "
                "ORDER BY seq LIMIT ?",
                (chunk,),
            ).fetchall()
            if not victims:
                return  # only events/batched items left: keep them even past the bound
            if over_rows == 0:
                # Over on bytes only: drop just enough.
                excess, cut = self._bytes - self.max_bytes, []
                for seq, nbytes in victims:
                    cut.append((seq, nbytes))
                    excess -= nbytes
                    if excess <= 0:
                        break
                victims = cut
            self._db.executemany("DELETE FROM items WHERE seq = ?", [(v[0],) for v in victims])
            self._rows -= len(victims)
            self._bytes -= sum(v[1] for v in victims)
            self._bump("dropped_samples", len(victims))

    def _oldest_unbatched(self, max_items: int, max_bytes: int) -> list[int]:
        rows = self._db.execute(
            "SELECT seq, nbytes FROM items WHERE batch_id IS NULL ORDER BY seq LIMIT ?",
            (max_items,),
        ).fetchall()
        picked: list[int] = []
        total = 0
        for seq, nbytes in rows:
            if picked and total + nbytes > max_bytes:
                break
            picked.append(seq)
            total += nbytes
        return picked

    def _load(self, batch_id: str) -> SpoolBatch:
        batch = SpoolBatch(batch_id=batch_id, items={k: [] for k in KINDS})
        for kind, body, nbytes in self._db.execute(
            "SELECT kind, body, nbytes FROM items WHERE batch_id = ? ORDER BY seq", (batch_id,)
        ):
            batch.items.setdefault(kind, []).append(body)
            batch.nbytes += nbytes
        return batch


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (or ROLLBACK on error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")
