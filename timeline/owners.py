"""GPU ownership on ingest: a node-bound agent writes only for GPUs of the nodes it may write.

A token bound to `node-a*` can name only its own nodes (timeline.intake checks every node an
item names), but a GPU is keyed by its UUID: without this check such an agent could re-home
another node's GPU (a `gpus` item with a stolen UUID), write samples under it, or pin a fake
Xid on it. The stored owner decides; a GPU not stored yet is registered under the node the
item names, which the token was allowed to write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from timeline import tables as t
from timeline.intake import Intake
from timeline.models import ITEM_KINDS, FieldError, RejectedItem

# kind -> the field of its items that names a GPU
_GPU_FIELDS = {
    "gpus": "uuid",
    "samples": "gpu_uuid",
    "events": "gpu_uuid",
    "allocations": "gpu_uuid",
}


def owners_of(session: Session, uuids: set[str]) -> dict[str, str]:
    """uuid -> owning node: the inventory's node, else the node its samples came from first."""
    if not uuids:
        return {}
    wanted = sorted(uuids)
    out: dict[str, str] = {}
    for table in (t.gpu_ids, t.gpus):  # the inventory (gpus) wins where both know the GPU
        rows = session.execute(select(table.c.uuid, table.c.node).where(table.c.uuid.in_(wanted)))
        out.update(dict(rows.all()))
    return out


def refuse_foreign_gpus(
    session: Session, *, intake: Intake, may_write_node: Callable[[str], bool]
) -> int:
    """Leave out of `intake.batch` each item naming a GPU stored under a node the token may not
    write, listing it in `intake.rejected` (403); returns how many were left out."""
    batch = intake.batch
    lists: dict[str, list[Any]] = {k: getattr(batch, k) for k in _GPU_FIELDS}
    lists["samples"] = intake.samples  # they travel apart, as rows
    named = {
        uuid
        for kind, attr in _GPU_FIELDS.items()
        for item in lists[kind]
        if (uuid := getattr(item, attr)) is not None
    }
    foreign = {u: n for u, n in owners_of(session, named).items() if not may_write_node(n)}
    if not foreign:
        return 0
    update: dict[str, list[Any]] = {}
    left_out = 0
    for kind, attr in _GPU_FIELDS.items():
        kept, kept_pos = [], []
        positions = intake.positions.get(kind, [])
        for i, item in enumerate(lists[kind]):
            pos = positions[i] if i < len(positions) else i
            owner = foreign.get(getattr(item, attr) or "")
            if owner is None:
                kept.append(item)
                kept_pos.append(pos)
                continue
            left_out += 1
            error = f"this GPU belongs to node {owner!r}, which this agent token may not write"
            intake.rejected.append(
                RejectedItem(
                    kind=kind,
                    index=pos,
                    status=403,
                    errors=[FieldError(field=f"{kind}.{pos}.{attr}", error=error)],
                )
            )
        update[kind] = kept
        intake.positions[kind] = kept_pos
    intake.samples = update.pop("samples")
    intake.batch = batch.model_copy(update=update)
    intake.rejected.sort(key=lambda r: (ITEM_KINDS.index(r.kind), r.index))
    return left_out
