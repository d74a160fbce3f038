"""Who holds which GPU now: open allocations only, each named with its job's owner."""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.orm import Session

from timeline import history
from timeline import tables as t
from timeline.history import Holder

NOW = 1_800_000_000.0


def _job(job_id: str, scheduler: str, user: str) -> dict[str, object]:
    return {"scheduler": scheduler, "cluster": "c", "job_id": job_id, "user": user,
            "account": f"acct-{user}", "partition": "gpu", "state": "RUNNING",
            "nodes": [], "payload": {}, "updated_ts": NOW, "restart_count": 0}  # fmt: skip


def _alloc(
    job_id: str, scheduler: str, node: str, gpu: int, end: float | None
) -> dict[str, object]:
    return {"scheduler": scheduler, "job_id": job_id, "node": node, "gpu_index": gpu,
            "start_ts": NOW - 100, "end_ts": end}  # fmt: skip


def test_holders_are_the_open_allocations_with_their_jobs_owner_per_scheduler(
    session: Session,
) -> None:
    session.execute(
        insert(t.jobs),
        [_job("1", "slurm", "alice"), _job("1", "kubernetes", "bob"), _job("2", "slurm", "carol"),
         _job("old", "slurm", "dave")],
    )  # fmt: skip
    session.execute(
        insert(t.allocations),
        [
            _alloc("1", "slurm", "n1", 0, None),
            _alloc("1", "kubernetes", "n2", -1, None),  # same job id, other scheduler
            _alloc("2", "slurm", "n1", 1, NOW + 50),  # ends later: still held now
            _alloc("old", "slurm", "n1", 2, NOW - 10),  # ended: holds nothing
            _alloc("ghost", "slurm", "n1", 3, None),  # no such job: holds nothing
        ],
    )
    session.commit()
    got = sorted(history.holders_at(session, at=NOW))
    assert got == [
        Holder("n1", 0, "1", "alice", "acct-alice", "gpu"),
        Holder("n1", 1, "2", "carol", "acct-carol", "gpu"),
        Holder("n2", -1, "1", "bob", "acct-bob", "gpu"),
    ]
