"""ingest batch digests (a reused batch_id with other content is refused) and server heartbeats

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ingest_batches") as batch_op:
        batch_op.add_column(sa.Column("digest", sa.String(64), nullable=True))
    op.create_table(
        "server_heartbeats",
        sa.Column("server", sa.String(255), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("server", name=op.f("pk_server_heartbeats")),
    )


def downgrade() -> None:
    op.drop_table("server_heartbeats")
    with op.batch_alter_table("ingest_batches") as batch_op:
        batch_op.drop_column("digest")
