"""Group commit of agents' sample batches: the batches that queue while one transaction runs
are stored together in the next.

An agent's usual batch is one sample per GPU of one node (8 rows). Stored one transaction per
batch, the server spent its time per batch, not per row: with 25k GPUs on PostgreSQL (py-spy
of the server under `bench scale`) claiming the batch id took 25% (the pool's ping and checkout
included), begin and commit 11%, marking the node seen 7%, the samples 18%. Here one writer
thread stores a group with one claim statement, one samples write, one node touch and one
commit. Nothing waits on a timer: a lone batch is stored at once; under load the groups grow
with it (PostgreSQL's own WAL group commit works the same way).

Each batch is still stored exactly once and answered as if alone: its claim and its samples
commit together. A batch whose id is already stored (a replay or a conflict), a second batch
of one id in one group, a node-bound token's batch naming a GPU of a node it may not write,
and every batch of a group whose transaction failed are stored alone as the ungrouped ingest
stores them (timeline.owners, then service.append_batch), which answers duplicate, 409, 503
or the refused items as it always did.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

from timeline import claims, owners, service
from timeline import samples as sample_store
from timeline.daemon import DaemonLoop
from timeline.db import WriteLock, unit_of_work
from timeline.errors import StoreUnavailable
from timeline.intake import Intake
from timeline.models import AppendResult, Batch, SampleRow

log = logging.getLogger(__name__)

MAX_GROUP = 400  # batches per transaction: 2,800 claim parameters, under both drivers' limits
POLL_S = 0.2


@dataclass
class Pending:
    """A batch waiting for its group, and the future its request awaits."""

    intake: Intake
    received_ts: float
    # A node-bound token's test of a node (None: a fleet-wide token); see timeline.owners.
    may_write_node: Callable[[str], bool] | None = None
    future: Future[AppendResult] = field(default_factory=Future)

    @classmethod
    def of(
        cls,
        intake: Intake,
        *,
        received_ts: float,
        may_write_node: Callable[[str], bool] | None = None,
    ) -> Pending:
        """A taken-in batch, received at `received_ts`."""
        return cls(intake, received_ts, may_write_node)

    @property
    def batch(self) -> Batch:
        """The batch's envelope (its samples travel apart, as rows)."""
        return self.intake.batch

    @property
    def samples(self) -> list[SampleRow]:
        """The batch's samples, as light rows."""
        return self.intake.samples

    def claim(self) -> claims.BatchClaim:
        """Its ingest_batches row."""
        b = self.batch
        return claims.BatchClaim(
            b.batch_id, b.agent, b.node, self.received_ts, len(self.samples), 0, self.intake.digest
        )

    def result(self) -> AppendResult:
        """Its answer once its group committed."""
        return AppendResult(
            batch_id=self.batch.batch_id, duplicate=False, samples=len(self.samples)
        )


# Batches of more samples than this are stored alone, concurrently: their rows, not their
# count, cost the time, and one writer thread would queue the database work that PostgreSQL's
# backends do side by side (`bench ingest`'s 1,000-sample batches: 25k GPU-samples/s grouped
# against 32-36k alone, alternating runs). An agent's batch is a node's GPUs times its polls.
GROUP_MAX_SAMPLES = 256


def groupable(intake: Intake) -> bool:
    """Whether a batch may go in a group: a few samples and nothing else, nothing rejected."""
    b = intake.batch
    others = b.gpus or b.nodes or b.events or b.jobs or b.allocations or b.job_patches
    small = 0 < len(intake.samples) <= GROUP_MAX_SAMPLES
    return small and not others and not intake.rejected and not b.samples


class GroupWriter(DaemonLoop):
    """Stores sample-only batches several per transaction on one thread; see the module."""

    name = "ingest-group-commit"

    def __init__(
        self, factory: sessionmaker[Session], lock: WriteLock, *, max_group: int = MAX_GROUP
    ) -> None:
        super().__init__()
        self.factory = factory
        self.lock = lock
        self.max_group = max_group
        self._queue: queue.SimpleQueue[Pending] = queue.SimpleQueue()
        self.transactions = 0  # the groups committed, and the batches in them
        self.batches = 0

    def submit(
        self,
        intake: Intake,
        *,
        received_ts: float,
        may_write_node: Callable[[str], bool] | None = None,
    ) -> Future[AppendResult]:
        """Queue a groupable batch; the future gives its AppendResult or its store error.
        `may_write_node`: a node-bound token's test; a batch naming a GPU of a node it may not
        write is stored alone, that GPU's samples refused as the ungrouped path does."""
        if self._stop.is_set():
            raise StoreUnavailable("the server is stopping", 1)
        self.start()
        item = Pending.of(intake, received_ts=received_ts, may_write_node=may_write_node)
        # Running, so not cancellable: a request cancelled while it waits (its client gone)
        # must not leave a future the writer thread cannot set. The batch is stored anyway;
        # the agent's retry of it is then answered `duplicate`.
        item.future.set_running_or_notify_cancel()
        self._queue.put(item)
        return item.future

    def _run(self) -> None:
        while not (self._stop.is_set() and self._queue.empty()):
            try:
                first = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                continue
            group = [first]
            while len(group) < self.max_group:
                try:
                    group.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self.store(group)
            except BaseException as exc:  # the thread must live on: answer whoever waits
                log.exception("the ingest group writer failed on a group of %d", len(group))
                for p in group:
                    if not p.future.done():
                        p.future.set_exception(exc)

    def store(self, group: Sequence[Pending]) -> None:
        """Store a group in one transaction, and alone each batch that cannot go in it."""
        try:
            together, alone = self._together(group)
        except Exception as exc:  # every batch is retried alone, and answered
            log.warning("a group of %d batches failed (%s); storing each alone", len(group), exc)
            together, alone = [], list(group)
        for p in together:
            p.future.set_result(p.result())
        for p in alone:
            self._alone(p)

    def _together(self, group: Sequence[Pending]) -> tuple[list[Pending], list[Pending]]:
        firsts: dict[str, Pending] = {}
        for p in group:
            firsts.setdefault(p.batch.batch_id, p)
        store = sample_store.store()
        with self.lock.hold(), unit_of_work(self.factory) as session:
            foreign = {id(p) for p in _foreign(session, list(firsts.values()))}
            clean = [p for p in firsts.values() if id(p) not in foreign]
            if not store.in_transaction:
                # Samples bound elsewhere (VictoriaMetrics) are written before the claim takes
                # SQLite's write lock, not while the import runs under it: at 100k GPUs the
                # imports held it for seconds and starved the leader lease. Only batches not
                # stored yet; if a concurrent delivery of the same id claims it first, its
                # samples were written twice, which VictoriaMetrics stores once (only an agent
                # that reuses an id for other content could slip samples in through that race).
                stored = claims.stored_ids(session, ids=[p.batch.batch_id for p in clean])
                clean = [p for p in clean if p.batch.batch_id not in stored]
                store.append_many(session, parts=[(p.batch.node, p.samples) for p in clean])
            claimed = claims.claim_batches(session, claims=[p.claim() for p in clean])
            together = [p for p in clean if p.batch.batch_id in claimed]
            if store.in_transaction:
                store.append_many(session, parts=[(p.batch.node, p.samples) for p in together])
            seen: dict[str, float] = {}
            for p in together:
                seen[p.batch.node] = max(seen.get(p.batch.node, 0.0), p.received_ts)
            service.touch_nodes(session, seen=seen)
        if together:  # a group of replays alone stored nothing
            self.transactions += 1
            self.batches += len(together)
        kept = {id(p) for p in together}
        return together, [p for p in group if id(p) not in kept]

    def _alone(self, p: Pending) -> None:
        """Store one batch as the ungrouped ingest does, and answer its request."""
        try:
            result = store_alone(
                self.factory,
                self.lock,
                intake=p.intake,
                received_ts=p.received_ts,
                may_write_node=p.may_write_node,
            )
        except Exception as exc:  # the request that sent it answers it
            p.future.set_exception(exc)
            return
        p.future.set_result(result)

    def stop(self) -> None:
        """Store what is queued, then stop; a batch submitted after this is refused (503)."""
        super().stop()
        while True:  # submitted between the loop's last look and the stop flag: answer them
            try:
                self._alone(self._queue.get_nowait())
            except queue.Empty:
                return


def store_alone(
    factory: sessionmaker[Session],
    lock: WriteLock,
    *,
    intake: Intake,
    received_ts: float | None = None,
    may_write_node: Callable[[str], bool] | None = None,
    max_items: int = 0,
) -> AppendResult:
    """Store one taken-in batch in its own transaction (received now, unless `received_ts`);
    a node-bound token's (`may_write_node`) items naming another node's GPU are refused."""
    with lock.hold(), unit_of_work(factory) as session:
        if may_write_node is not None:
            owners.refuse_foreign_gpus(session, intake=intake, may_write_node=may_write_node)
        return service.append_batch(
            session,
            batch=intake.batch,
            received_ts=time.time() if received_ts is None else received_ts,
            max_items=max_items,
            digest=intake.digest,
            rejected=intake.rejected,
            samples=intake.samples,
        )


def _foreign(session: Session, group: Sequence[Pending]) -> list[Pending]:
    """The node-bound batches naming a GPU owned by a node their token may not write: stored,
    or registered by an earlier batch of this group (as it would be, stored one by one)."""
    if all(p.may_write_node is None for p in group):
        return []
    held = owners.owners_of(session, {s.gpu_uuid for p in group for s in p.samples})
    out = []
    for p in group:
        for s in p.samples:  # a GPU seen first here is registered under this batch's node
            held.setdefault(s.gpu_uuid, p.batch.node)
        may = p.may_write_node
        if may is not None and not all(may(held[s.gpu_uuid]) for s in p.samples):
            out.append(p)
    return out


__all__ = ["GROUP_MAX_SAMPLES", "MAX_GROUP", "GroupWriter", "Pending", "groupable", "store_alone"]
