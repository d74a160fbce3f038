"""healer: actions, their audit, job lineage, notices to people, healer state

Revision ID: 0005
Revises: 0003
Create Date: 2026-11-23 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0005"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _actions() -> None:
    op.create_table(
        "healer_actions",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("scheduler", sa.String(length=16), nullable=True),
        sa.Column("cluster", sa.String(length=64), nullable=False),
        sa.Column("partition", sa.String(length=128), nullable=True),
        sa.Column("node", sa.String(length=255), nullable=True),
        sa.Column("job_id", sa.String(length=128), nullable=True),
        sa.Column("incident_id", sa.BigInteger(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("not_before_ts", sa.Float(), nullable=True),
        sa.Column("created_ts", sa.Float(), nullable=False),
        sa.Column("updated_ts", sa.Float(), nullable=False),
        sa.Column("started_ts", sa.Float(), nullable=True),
        sa.Column("finished_ts", sa.Float(), nullable=True),
        sa.Column("approved_by", sa.String(length=128), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_healer_actions")),
        sa.UniqueConstraint("key", name=op.f("uq_healer_actions_key")),
    )
    with op.batch_alter_table("healer_actions") as batch_op:
        batch_op.create_index("ix_healer_actions_state", ["state"])
        batch_op.create_index("ix_healer_actions_incident_id", ["incident_id"])
        batch_op.create_index("ix_healer_actions_node", ["node"])
        batch_op.create_index("ix_healer_actions_job_id", ["job_id"])
        batch_op.create_index("ix_healer_actions_kind_started", ["kind", "started_ts"])


def _audit_and_lineage() -> None:
    op.create_table(
        "healer_audit",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("action_id", sa.BigInteger(), nullable=True),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("what", sa.String(length=16), nullable=False),
        sa.Column("request", sa.JSON(), nullable=True),
        sa.Column("rc", sa.Integer(), nullable=True),
        sa.Column("output", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("approved_by", sa.String(length=128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_healer_audit")),
    )
    with op.batch_alter_table("healer_audit") as batch_op:
        batch_op.create_index("ix_healer_audit_action_id", ["action_id"])
    op.create_table(
        "healer_lineage",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("scheduler", sa.String(length=16), nullable=False),
        sa.Column("cluster", sa.String(length=64), nullable=False),
        sa.Column("old_job_id", sa.String(length=128), nullable=False),
        sa.Column("new_job_id", sa.String(length=128), nullable=False),
        sa.Column("how", sa.String(length=16), nullable=False),
        sa.Column("action_id", sa.BigInteger(), nullable=True),
        sa.Column("incident_id", sa.BigInteger(), nullable=True),
        sa.Column("checkpoint", sa.Text(), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("wandb_run", sa.String(length=255), nullable=True),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_healer_lineage")),
        sa.UniqueConstraint("action_id", name=op.f("uq_healer_lineage_action_id")),
    )
    with op.batch_alter_table("healer_lineage") as batch_op:
        batch_op.create_index("ix_healer_lineage_old_job_id", ["old_job_id"])
        batch_op.create_index("ix_healer_lineage_new_job_id", ["new_job_id"])


def _notices_and_state() -> None:
    op.create_table(
        "healer_notices",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("recipient", sa.String(length=128), nullable=False),
        sa.Column("incident_id", sa.BigInteger(), nullable=True),
        sa.Column("job_id", sa.String(length=128), nullable=True),
        sa.Column("action_id", sa.BigInteger(), nullable=True),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("sent_ts", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_healer_notices")),
        sa.UniqueConstraint("key", name=op.f("uq_healer_notices_key")),
    )
    with op.batch_alter_table("healer_notices") as batch_op:
        batch_op.create_index("ix_healer_notices_sent_ts", ["sent_ts"])
    op.create_table(
        "healer_state",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("updated_ts", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_healer_state")),
    )


def upgrade() -> None:
    _actions()
    _audit_and_lineage()
    _notices_and_state()


def downgrade() -> None:
    for table in ("healer_state", "healer_notices", "healer_lineage", "healer_audit"):
        op.drop_table(table)
    op.drop_table("healer_actions")
