"""nodes.grid_group and nodes.drained_by, kept by PostgreSQL; an index on gpus.name

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-23 22:40:00

The fleet page on PostgreSQL (timeline.fleet_cells) named each node's grid group and drain
state in its statement: a parse of the node's labels into jsonb and a case-insensitive regular
expression over its state, for every node on every page view (about 45 ms of the statement at
12.5k nodes). Both now are stored generated columns, computed by PostgreSQL when a node is
written. SQLite keeps its per-GPU Python path and gets neither.

The fleet's model filter read `SELECT DISTINCT name FROM gpus`, a scan of the inventory (15-35
ms at 100k GPUs) for a handful of names; with an index on gpus.name, fleet_cells skips from one
name to the next in it (0.1 ms). Both backends get the index.

The expressions are timeline.fleet's rules as this revision found them (node_group over
GROUP_LABELS; DRAIN_WORDS; the healer's reason prefix): a migration must not import live
definitions. tests/timeline/test_fleet_cells.py compares the cells with Python's rules, so a
change to those rules without a revision fails there.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GROUP_LABELS = (
    ("partitions", "partitions"),
    ("partition", "partition"),
    ("fleetmedic.io/partition", "partition"),
    ("rack", "rack"),
    ("topology.kubernetes.io/rack", "rack"),
    ("nvidia.com/gpu.clique", "gpu.clique"),
)
DRAIN_WORDS = "DRAIN|DOWN|FAIL|MAINT|REBOOT|CORDON"
OUR_DRAIN_PREFIX = "fleetmedic:"


def _group() -> str:
    # The first label of GROUP_LABELS whose value is a non-empty string, else 'all'.
    arms = " ".join(
        f"WHEN jsonb_typeof(labels::jsonb -> '{key}') = 'string' "
        f"AND labels::jsonb ->> '{key}' <> '' THEN '{short}=' || (labels::jsonb ->> '{key}')"
        for key, short in GROUP_LABELS
    )
    return f"CASE {arms} ELSE 'all' END"


# 0 not drained, 1 drained by a person, 2 by fleetmedic's healer (its reasons' prefix).
DRAINED = (
    f"CASE WHEN state ~* '{DRAIN_WORDS}' "
    f"THEN CASE WHEN starts_with(reason, '{OUR_DRAIN_PREFIX}') THEN 2 ELSE 1 END ELSE 0 END"
)


def upgrade() -> None:
    op.create_index("ix_gpus_name", "gpus", ["name"])
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"ALTER TABLE nodes ADD COLUMN grid_group TEXT GENERATED ALWAYS AS ({_group()}) STORED, "
        f"ADD COLUMN drained_by SMALLINT GENERATED ALWAYS AS ({DRAINED}) STORED"
    )


def downgrade() -> None:
    op.drop_index("ix_gpus_name", "gpus")
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE nodes DROP COLUMN grid_group, DROP COLUMN drained_by")
