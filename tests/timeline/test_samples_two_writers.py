"""Two writers (as two server processes: own engines, own id caches) append at once."""

from __future__ import annotations

import random
import threading
import time

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from timeline import db, queries, samples
from timeline import tables as t
from timeline.models import SampleRow

NOW = float(int(time.time()) - 600)  # whole seconds: ms times are exact


def _writer(url: str, seed: int, errors: list[BaseException]) -> None:
    rng = random.Random(seed)
    engine = db.make_engine(url)
    factory = db.make_sessionmaker(engine)
    try:
        for k in range(30):
            gpus = [f"GPU-{i:03d}" for i in range(60)]
            rng.shuffle(gpus)  # each batch locks the GPUs in another order
            # writer 0 writes even milliseconds, writer 1 odd ones: the newest is known
            ts = NOW + (2 * k + seed) / 1000
            rows = [SampleRow(ts, g, util_gpu=float(seed), power_w=float(k)) for g in gpus]
            with db.unit_of_work(factory) as s:
                samples.store().append(s, node="n1", samples=rows)
    except BaseException as exc:
        errors.append(exc)
    finally:
        engine.dispose()


def test_two_writers_of_the_same_gpus_neither_deadlock_nor_lose_the_newest_sample(
    migrated_url: str, session: Session
) -> None:
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_writer, args=(migrated_url, n, errors)) for n in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert errors == []
    assert session.execute(select(func.count()).select_from(t.gpu_ids)).scalar() == 60
    assert queries.count_rows(session, table="samples") == 2 * 30 * 60  # staged ones too
    latest = samples.store().latest(session)
    assert len(latest) == 60
    newest = NOW + (2 * 29 + 1) / 1000  # writer 1's last batch
    assert all(v["util_gpu"] == 1.0 and abs(v["ts"] - newest) < 1e-4 for v in latest.values())
