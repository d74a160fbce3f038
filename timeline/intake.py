"""Taking a batch in: parse, count, validate item by item, check node bindings, digest.

One bad item never blocks the rest: the envelope (agent, node, batch_id, the item lists) must
be right or the whole batch is refused, but each item is checked on its own and only the bad
ones are rejected, each with the fields that break the contract. The digest of the whole body
(canonical JSON) lets the store tell a replay of a batch from a different batch under a reused
batch_id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from timeline.bounds import WINDOW_CONTEXT, TimeWindow
from timeline.errors import BatchTooLarge, InvalidBatch, NodeNotAllowed
from timeline.models import (
    ITEM_KINDS,
    Allocation,
    Batch,
    Event,
    FieldError,
    GpuInfo,
    Job,
    JobPatch,
    Node,
    RejectedItem,
    Sample,
    SampleRow,
)
from timeline.sample_check import fast_rows

ITEM_MODELS: dict[str, type[BaseModel]] = {
    "gpus": GpuInfo,
    "samples": Sample,
    "events": Event,
    "jobs": Job,
    "allocations": Allocation,
    "nodes": Node,
    "job_patches": JobPatch,
}
_LISTS = {kind: TypeAdapter(list[model]) for kind, model in ITEM_MODELS.items()}  # type: ignore[valid-type]
_MAX_ERRORS = 20  # per item and per refused envelope: enough to fix it, bounded to send
# pydantic's words for a pattern mismatch quote our regex; say what it means instead.
_PATTERN_WORDS = "contains a NUL or another control character"


@dataclass
class Intake:
    """A batch as taken in: its valid items, the rejected ones, and the body's digest.

    The valid samples travel apart, as light rows in `samples`; `batch.samples` stays empty.
    """

    batch: Batch
    digest: str
    samples: list[SampleRow] = field(default_factory=list)
    rejected: list[RejectedItem] = field(default_factory=list)
    # kind -> the body's index of each kept item, so later checks name items as sent
    positions: dict[str, list[int]] = field(default_factory=dict)


def field_errors(exc: ValidationError, prefix: tuple[str | int, ...] = ()) -> list[FieldError]:
    """The violations of a ValidationError as (dotted field, message), capped."""
    out = []
    for err in exc.errors(include_url=False, include_input=False)[:_MAX_ERRORS]:
        msg = _PATTERN_WORDS if err["type"] == "string_pattern_mismatch" else err["msg"]
        path = ".".join(str(p) for p in (*prefix, *err["loc"])) or "body"
        out.append(FieldError(field=path, error=msg))
    return out


def digest_of(obj: Any) -> str:
    """sha256 of the canonical JSON of a parsed body (sorted keys, compact)."""
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()


def take_in(
    body: bytes,
    *,
    max_items: int,
    max_records: int = 0,
    window: TimeWindow | None = None,
    may_write_node: Callable[[str], bool] | None = None,
) -> Intake:
    """Parse and check an ingest body; raises InvalidBatch, BatchTooLarge or NodeNotAllowed.

    `max_items` bounds the items of every kind together, `max_records` those stored one
    statement each (all but samples and events); `window` bounds the times of what was
    observed; `may_write_node` (an agent token's binding) is asked about the batch's node and
    every node an item names.
    """
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidBatch([FieldError(field="body", error=f"not JSON: {exc}")]) from None
    if not isinstance(obj, dict):
        raise InvalidBatch([FieldError(field="body", error="must be a JSON object")])
    lists = _item_lists(obj, max_items, max_records)
    head = _envelope({k: v for k, v in obj.items() if k not in ITEM_KINDS})
    if may_write_node is not None and not may_write_node(head.node):
        raise NodeNotAllowed(head.node)
    context = {WINDOW_CONTEXT: window} if window is not None else None
    rejected: list[RejectedItem] = []
    good: dict[str, list[Any]] = {}
    rows, positions = _sample_rows(lists.pop("samples"), context, rejected, window)
    for kind, items in lists.items():
        good[kind] = list(_validate_models(kind, items, context, rejected))
    if may_write_node is not None:
        _bind_nodes(good, may_write_node, rejected)
    rejected.sort(key=lambda r: (ITEM_KINDS.index(r.kind), r.index))
    at = {k: [i for i, _ in v] for k, v in good.items()} | {"samples": positions}
    batch = head.model_copy(update={k: [item for _, item in v] for k, v in good.items()})
    return Intake(batch=batch, digest=digest_of(obj), samples=rows, rejected=rejected, positions=at)


def _item_lists(obj: dict[str, Any], max_items: int, max_records: int) -> dict[str, list[Any]]:
    lists: dict[str, list[Any]] = {}
    for kind in ITEM_KINDS:
        items = obj.get(kind, [])
        if not isinstance(items, list):
            raise InvalidBatch([FieldError(field=kind, error="must be a list")])
        lists[kind] = items
    # Counted before any item is validated: the work a batch can cause is bounded.
    total = sum(len(v) for v in lists.values())
    if max_items and total > max_items:
        raise BatchTooLarge(f"batch has {total} items; the limit is {max_items}")
    records = sum(len(v) for k, v in lists.items() if k not in ("samples", "events"))
    if max_records and records > max_records:
        raise BatchTooLarge(
            f"batch has {records} GPUs, jobs, allocations, nodes and job patches; "
            f"the limit is {max_records}"
        )
    return lists


def _envelope(head: dict[str, Any]) -> Batch:
    try:
        return Batch.model_validate(head)
    except ValidationError as exc:
        raise InvalidBatch(field_errors(exc)) from None


def _sample_rows(
    items: list[Any],
    context: dict[str, Any] | None,
    rejected: list[RejectedItem],
    window: TimeWindow | None,
) -> tuple[list[SampleRow], list[int]]:
    """The valid samples as rows and the body's index of each; the invalid go to `rejected`."""
    if not items:
        return [], []
    rows = fast_rows(items, window)
    if rows is not None:  # the common case, a model per sample cost more than storing it
        return rows, list(range(len(rows)))
    # The model judges, so the rejections and their words are the model's.
    kept = list(_validate_models("samples", items, context, rejected))
    return [SampleRow.of(s) for _, s in kept], [i for i, _ in kept]  # type: ignore[arg-type]


def _validate_models(
    kind: str, items: list[Any], context: dict[str, Any] | None, rejected: list[RejectedItem]
) -> Iterator[tuple[int, BaseModel]]:
    """(index, model) of each valid item; the invalid go to `rejected`."""
    if not items:
        return
    try:  # the common case: every item is fine, one call validates them all
        yield from enumerate(_LISTS[kind].validate_python(items, context=context))
        return
    except ValidationError:
        pass
    model = ITEM_MODELS[kind]
    for i, item in enumerate(items):
        try:
            yield i, model.model_validate(item, context=context)
        except ValidationError as exc:
            errors = field_errors(exc, (kind, i))
            rejected.append(RejectedItem(kind=kind, index=i, status=422, errors=errors))


def _named_nodes(kind: str, item: Any) -> list[tuple[str, str]]:
    """(field, node) pairs of the nodes an item writes data for."""
    if kind in ("gpus", "allocations") or (kind == "events" and item.node is not None):
        return [("node", item.node)]
    if kind == "nodes":
        return [("name", item.name)]
    if kind == "jobs":
        return [(f"nodes.{i}", n) for i, n in enumerate(item.nodes)]
    return []  # samples are stored under the batch's node; job patches name no node


def _bind_nodes(
    good: dict[str, list[Any]], allowed: Callable[[str], bool], rejected: list[RejectedItem]
) -> None:
    for kind, items in good.items():
        if kind in ("samples", "job_patches"):  # they name no node (see _named_nodes)
            continue
        kept = []
        for i, item in items:
            refused = [
                FieldError(
                    field=f"{kind}.{i}.{where}",
                    error=f"this agent token may not write node {node!r}",
                )
                for where, node in _named_nodes(kind, item)
                if not allowed(node)
            ]
            if refused:
                rejected.append(RejectedItem(kind=kind, index=i, status=403, errors=refused))
            else:
                kept.append((i, item))
        good[kind] = kept
