"""Delivery: retries with backoff, 413 split, 422 quarantine, 401/403 stop; same batch ids."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from collector.base import Observations
from collector.delivery import Delivery, Outcome
from collector.spool import Spool
from timeline.models import Batch, Sample

TOKEN = "s3cret-agent-token"


class Server:
    """Records what arrives and answers with the next scripted status (then 200)."""

    def __init__(self, script: list[int | Callable[[httpx.Request], httpx.Response]]) -> None:
        self.script = list(script)
        self.seen: list[Batch] = []
        self.headers: list[httpx.Headers] = []
        self.stored: dict[str, int] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        batch = Batch.model_validate_json(request.content)
        self.seen.append(batch)
        self.headers.append(request.headers)
        step = self.script.pop(0) if self.script else 200
        if callable(step):
            return step(request)
        if step == 0:
            raise httpx.ConnectError("connection refused", request=request)
        if step != 200:
            return httpx.Response(step, json={"detail": f"scripted {step}"})
        duplicate = batch.batch_id in self.stored
        self.stored.setdefault(batch.batch_id, len(batch.samples))
        return httpx.Response(200, json={"batch_id": batch.batch_id, "duplicate": duplicate})


def _delivery(tmp_path: Path, server: Server, sleeps: list[float], **kw: object) -> Delivery:
    spool = Spool(tmp_path / "spool.db")
    return Delivery(
        spool=spool,
        server_url="http://fleet.test/",
        token=TOKEN,
        agent="agent-1",
        node="n1",
        client=httpx.Client(transport=httpx.MockTransport(server)),
        sleep=sleeps.append,
        **kw,  # type: ignore[arg-type]
    )


def _put(d: Delivery, n: int) -> None:
    d.spool.put(Observations(samples=[Sample(ts=float(i), gpu_uuid="GPU-a") for i in range(n)]))


def test_delivers_with_bearer_token_and_acks(tmp_path: Path) -> None:
    server = Server([])
    d = _delivery(tmp_path, server, [])
    _put(d, 4)
    assert d.deliver_once() == Outcome.DELIVERED
    assert server.headers[0]["authorization"] == f"Bearer {TOKEN}"
    assert server.seen[0].node == "n1" and len(server.seen[0].samples) == 4
    assert d.spool.pending() == 0 and d.deliver_once() == Outcome.EMPTY


def test_transient_failures_are_retried_with_growing_backoff_and_the_same_batch_id(
    tmp_path: Path,
) -> None:
    server = Server([503, 0, 429, 200])
    sleeps: list[float] = []
    d = _delivery(tmp_path, server, sleeps, backoff_initial_s=1.0)
    _put(d, 2)
    assert d.deliver_once() == Outcome.DELIVERED
    assert len({b.batch_id for b in server.seen}) == 1 and len(server.seen) == 4
    assert len(sleeps) == 3 and sleeps[0] >= 1.0 and sleeps[2] >= 4.0  # 1, 2, 4 s plus jitter
    assert d.stats.transient_failures == 3


def test_a_round_that_exhausts_its_attempts_keeps_the_batch_for_later(tmp_path: Path) -> None:
    server = Server([500, 500, 500])
    d = _delivery(tmp_path, server, [], attempts_per_round=3)
    _put(d, 2)
    assert d.deliver_once() == Outcome.RETRY_LATER
    assert d.spool.pending() == 2
    assert d.deliver_once() == Outcome.DELIVERED
    assert len({b.batch_id for b in server.seen}) == 1  # the re-send carries the same id


def test_replay_after_a_lost_answer_is_stored_once(tmp_path: Path) -> None:
    def stored_but_answer_lost(request: httpx.Request) -> httpx.Response:
        batch = Batch.model_validate_json(request.content)
        server.stored[batch.batch_id] = len(batch.samples)
        raise httpx.ReadTimeout("answer lost", request=request)

    server = Server([stored_but_answer_lost])
    d = _delivery(tmp_path, server, [])
    _put(d, 3)
    assert d.deliver_once() == Outcome.DELIVERED
    assert len(server.stored) == 1 and d.stats.duplicates == 1


def test_413_splits_until_the_server_accepts(tmp_path: Path) -> None:
    def limit(request: httpx.Request) -> httpx.Response:
        batch = Batch.model_validate_json(request.content)
        if len(batch.samples) > 3:
            return httpx.Response(413, json={"detail": "body over 1000 bytes"})
        server.stored[batch.batch_id] = len(batch.samples)
        return httpx.Response(200, json={"batch_id": batch.batch_id, "duplicate": False})

    server = Server([limit] * 20)
    d = _delivery(tmp_path, server, [])
    _put(d, 10)
    assert d.drain() == Outcome.EMPTY
    assert sum(server.stored.values()) == 10
    assert max(server.stored.values()) <= 3 and d.stats.splits >= 3
    assert d.spool.pending() == 0


def _refuses_poison(status: int, **headers: str) -> Callable[[httpx.Request], httpx.Response]:
    """A server that answers `status` to any batch holding the poison sample, 200 otherwise."""

    def answer(request: httpx.Request) -> httpx.Response:
        batch = Batch.model_validate_json(request.content)
        if any(s.gpu_uuid == "GPU-poison" for s in batch.samples):
            detail = [{"field": "samples.0.gpu_uuid", "error": "scripted refusal"}]
            return httpx.Response(status, json={"detail": detail}, headers=headers)
        return httpx.Response(200, json={"batch_id": batch.batch_id, "duplicate": False})

    return answer


def _put_with_poison(d: Delivery, n: int, at: int) -> None:
    samples = [Sample(ts=float(i), gpu_uuid="GPU-a") for i in range(n)]
    samples[at] = Sample(ts=float(at), gpu_uuid="GPU-poison")
    d.spool.put(Observations(samples=samples))


def test_a_refused_batch_is_bisected_until_the_bad_item_alone_is_dead_lettered(
    tmp_path: Path,
) -> None:
    server = Server([_refuses_poison(422)] * 100)
    d = _delivery(tmp_path, server, [])
    _put_with_poison(d, 16, at=11)
    assert d.drain() == Outcome.EMPTY
    (dead,) = d.spool.dead_letters()
    assert dead["status"] == 422 and "scripted refusal" in str(dead["detail"])
    assert "GPU-poison" in str(dead["body"]) and dead["kind"] == "samples"
    delivered = [s for b in server.seen[1:] for s in b.samples if s.gpu_uuid == "GPU-a"]
    assert d.stats.bisections == 4 and d.spool.counters()["delivered_samples"] == 15
    assert d.spool.counters()["dead_lettered_items"] == 1 and len(delivered) >= 15
    # The node's agent says so to the server: an `agent` event, delivered like any other.
    notes = [e for b in server.seen for e in b.events if e.kind == "agent"]
    assert len(notes) == 1 and "dead-lettered 1 samples item(s) after HTTP 422" in notes[0].message


def test_a_persistent_server_error_is_bisected_only_while_the_server_says_it_can_write(
    tmp_path: Path,
) -> None:
    ready = {"status": 503}

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/readyz":
            return httpx.Response(ready["status"], text="ready?")
        return _refuses_poison(500)(request)

    d = _delivery(tmp_path, Server([]), [], attempts_per_round=2, bisect_after=4)
    d._client = httpx.Client(transport=httpx.MockTransport(answer))
    _put_with_poison(d, 4, at=0)
    for _ in range(5):  # the database is down for everything: keep the batch, never bisect
        assert d.deliver_once() == Outcome.RETRY_LATER
    assert d.stats.bisections == 0 and d.spool.pending() == 4
    ready["status"] = 200  # now the server can write, yet this batch still fails: isolate it
    rounds = [d.deliver_once() for _ in range(20)]  # the agent's loop: a round per flush
    assert Outcome.SPLIT in rounds and rounds[-1] == Outcome.EMPTY
    (dead,) = d.spool.dead_letters()
    assert dead["status"] == 500 and "GPU-poison" in str(dead["body"])
    assert d.spool.counters()["delivered_samples"] == 3


def test_retry_after_is_honoured_and_a_busy_server_never_causes_bisection(tmp_path: Path) -> None:
    now = {"t": 1000.0}
    server = Server([_refuses_poison(503, **{"Retry-After": "7"})] * 10 + [200])
    sleeps: list[float] = []
    d = _delivery(tmp_path, server, sleeps, attempts_per_round=3, bisect_after=1)
    d._clock = lambda: now["t"]
    _put_with_poison(d, 2, at=0)
    assert d.deliver_once() == Outcome.RETRY_LATER
    assert sleeps == [7.0, 7.0] and len(server.seen) == 3
    assert d.deliver_once() == Outcome.RETRY_LATER and len(server.seen) == 3  # not yet
    now["t"] += 7.5
    assert d.deliver_once() == Outcome.RETRY_LATER and len(server.seen) == 6
    assert d.stats.bisections == 0 and d.spool.dead_letters() == []


def test_items_rejected_in_an_accepted_batch_go_to_dead_letters_one_by_one(
    tmp_path: Path,
) -> None:
    def partial(request: httpx.Request) -> httpx.Response:
        batch = Batch.model_validate_json(request.content)
        rejected = [
            {
                "kind": "samples",
                "index": i,
                "status": 422,
                "errors": [{"field": f"samples.{i}.ts", "error": "too old"}],
            }
            for i, s in enumerate(batch.samples)
            if s.gpu_uuid == "GPU-poison"
        ]
        answer = {"batch_id": batch.batch_id, "duplicate": False, "rejected": rejected}
        return httpx.Response(200, json=answer)

    server = Server([partial, partial])
    d = _delivery(tmp_path, server, [])
    _put_with_poison(d, 5, at=3)
    assert d.deliver_once() == Outcome.DELIVERED
    (dead,) = d.spool.dead_letters()
    assert dead["kind"] == "samples" and '"ts":3.0' in str(dead["body"])
    assert "samples.3.ts: too old" in str(dead["detail"])
    assert d.spool.counters()["delivered_samples"] == 4 and d.stats.dead_lettered_items == 1
    assert d.spool.pending() == 1  # the agent's note about it, on its way to the server


def test_a_409_dead_letters_the_batch_instead_of_re_sending_it_under_a_new_id(
    tmp_path: Path,
) -> None:
    server = Server([409])
    d = _delivery(tmp_path, server, [])
    _put(d, 3)
    assert d.deliver_once() == Outcome.QUARANTINED
    assert len(d.spool.dead_letters()) == 3 and d.stats.splits == d.stats.bisections == 0


@pytest.mark.parametrize("status", [401, 403])
def test_bad_token_stops_delivery_loudly_keeps_the_batch_and_never_logs_the_token(
    tmp_path: Path, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server([status, status])
    sleeps: list[float] = []
    d = _delivery(tmp_path, server, sleeps)
    _put(d, 2)
    with caplog.at_level(logging.DEBUG):
        assert d.deliver_once() == Outcome.AUTH_FAILED
        assert d.deliver_once() == Outcome.AUTH_FAILED
    assert len(server.seen) == 2 and not sleeps  # no retry storm within a round
    assert d.spool.pending() == 2
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and str(status) in errors[0].getMessage()
    assert TOKEN not in caplog.text


def test_body_is_the_batch_contract(tmp_path: Path) -> None:
    server = Server([])
    d = _delivery(tmp_path, server, [])
    _put(d, 1)
    d.deliver_once()
    body = json.loads(server.seen[0].model_dump_json())
    assert set(body) == {"agent", "node", "batch_id", "gpus", "samples", "events", "jobs",
                         "allocations", "nodes", "job_patches"}  # fmt: skip
