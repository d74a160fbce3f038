"""notifications: one row per incident state change, route and recipient (alerts sent once)

Revision ID: 0006
Revises: 0008
Create Date: 2026-11-23 11:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("subject_key", sa.String(128), nullable=False),
        sa.Column("incident_id", sa.BigInteger()),
        sa.Column("route", sa.String(64), nullable=False),
        sa.Column("sink", sa.String(16), nullable=False),
        sa.Column("recipient", sa.String(255), nullable=False),
        sa.Column("change", sa.String(48), nullable=False),
        sa.Column("group_key", sa.String(255)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("next_attempt_ts", sa.Float(), nullable=False),
        sa.Column("last_error", sa.String(500)),
        sa.Column("created_ts", sa.Float(), nullable=False),
        sa.Column("sent_ts", sa.Float()),
        sa.Column("last_sent_ts", sa.Float()),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_notifications"),
        sa.UniqueConstraint(
            "subject_key", "route", "recipient", "change", name="uq_notifications_change"
        ),
    )
    op.create_index("ix_notifications_status_next", "notifications", ["status", "next_attempt_ts"])
    op.create_index("ix_notifications_incident_id", "notifications", ["incident_id"])


def downgrade() -> None:
    op.drop_index("ix_notifications_incident_id", table_name="notifications")
    op.drop_index("ix_notifications_status_next", table_name="notifications")
    op.drop_table("notifications")
