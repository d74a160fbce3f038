"""gpus.gpu_id: each inventory GPU's integer id (gpu_ids), so the fleet joins on integers

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 20:20:00

The fleet page on PostgreSQL classifies 100k GPUs in one statement (timeline.fleet_cells); its
join from the inventory to each GPU's newest sample went through gpu_ids on the uuid text, a
100k-row hash join of its own. The inventory now carries the id. Every GPU already in the
inventory gets one (gpu_ids rows are added for those never sampled, under the inventory's
node, as the sample path would add them); readers fall back to gpu_ids where it is missing.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("gpus") as batch:
        batch.add_column(sa.Column("gpu_id", sa.Integer(), nullable=True))
    missing = "SELECT g.uuid, g.node FROM gpus g WHERE NOT EXISTS " \
        "(SELECT 1 FROM gpu_ids i WHERE i.uuid = g.uuid)"  # fmt: skip
    op.execute(f"INSERT INTO gpu_ids (uuid, node) {missing}")
    op.execute("UPDATE gpus SET gpu_id = (SELECT i.id FROM gpu_ids i WHERE i.uuid = gpus.uuid)")


def downgrade() -> None:
    with op.batch_alter_table("gpus") as batch:
        batch.drop_column("gpu_id")
