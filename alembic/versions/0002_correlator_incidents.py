"""correlator: incidents, idle findings, GPU power profiles, correlator state

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 12:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
OPEN = sa.text("state = 'open'")


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("occurrence", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("category", sa.String(length=32), nullable=True),
        sa.Column("blame", sa.String(length=16), nullable=False),
        sa.Column("title", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=True),
        sa.Column("code", sa.Integer(), nullable=True),
        sa.Column("culprit_node", sa.String(length=255), nullable=True),
        sa.Column("culprit_gpu_uuid", sa.String(length=96), nullable=True),
        sa.Column("culprit_pci_bus_id", sa.String(length=32), nullable=True),
        sa.Column("culprit_gpu_index", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.String(length=128), nullable=True),
        sa.Column("affected_jobs", sa.JSON(), nullable=False),
        sa.Column("opened_ts", sa.Float(), nullable=False),
        sa.Column("last_seen_ts", sa.Float(), nullable=False),
        sa.Column("resolved_ts", sa.Float(), nullable=True),
        sa.Column("resolution", sa.String(length=255), nullable=True),
        sa.Column("updated_ts", sa.Float(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("action", sa.String(length=255), nullable=True),
        sa.Column("explanation", sa.Text(), nullable=False),
        sa.Column("root_cause_event_id", sa.BigInteger(), nullable=True),
        sa.Column("evidence_event_ids", sa.JSON(), nullable=False),
        sa.Column("symptom_event_ids", sa.JSON(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
        sa.UniqueConstraint(
            "fingerprint", "occurrence", name="uq_incidents_fingerprint_occurrence"
        ),
    )
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.create_index(
            "uq_incidents_open_fingerprint",
            ["fingerprint"],
            unique=True,
            sqlite_where=OPEN,
            postgresql_where=OPEN,
        )
        batch_op.create_index("ix_incidents_state_last_seen", ["state", "last_seen_ts"])
        batch_op.create_index("ix_incidents_culprit_node", ["culprit_node"])
        batch_op.create_index("ix_incidents_job_id", ["job_id"])

    op.create_table(
        "idle_findings",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("scheduler", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.String(length=128), nullable=False),
        sa.Column("user", sa.String(length=128), nullable=True),
        sa.Column("account", sa.String(length=128), nullable=True),
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=96), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=True),
        sa.Column("pci_bus_id", sa.String(length=32), nullable=True),
        sa.Column("idle_since_ts", sa.Float(), nullable=False),
        sa.Column("last_seen_ts", sa.Float(), nullable=False),
        sa.Column("resolved_ts", sa.Float(), nullable=True),
        sa.Column("resolution", sa.String(length=255), nullable=True),
        sa.Column("max_util", sa.Float(), nullable=True),
        sa.Column("gpu_hours", sa.Float(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("updated_ts", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idle_findings")),
    )
    with op.batch_alter_table("idle_findings", schema=None) as batch_op:
        batch_op.create_index(
            "uq_idle_findings_open_gpu_job",
            ["gpu_uuid", "job_id"],
            unique=True,
            sqlite_where=OPEN,
            postgresql_where=OPEN,
        )
        batch_op.create_index("ix_idle_findings_state", ["state"])

    op.create_table(
        "gpu_power_profiles",
        sa.Column("gpu_uuid", sa.String(length=96), nullable=False),
        sa.Column("idle_w", sa.Float(), nullable=True),
        sa.Column("max_w", sa.Float(), nullable=True),
        sa.Column("limit_w", sa.Float(), nullable=True),
        sa.Column("updated_ts", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("gpu_uuid", name=op.f("pk_gpu_power_profiles")),
    )
    op.create_table(
        "correlator_state",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("updated_ts", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_correlator_state")),
    )


def downgrade() -> None:
    op.drop_table("correlator_state")
    op.drop_table("gpu_power_profiles")
    with op.batch_alter_table("idle_findings", schema=None) as batch_op:
        batch_op.drop_index("ix_idle_findings_state")
        batch_op.drop_index("uq_idle_findings_open_gpu_job")
    op.drop_table("idle_findings")
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.drop_index("ix_incidents_job_id")
        batch_op.drop_index("ix_incidents_culprit_node")
        batch_op.drop_index("ix_incidents_state_last_seen")
        batch_op.drop_index("uq_incidents_open_fingerprint")
    op.drop_table("incidents")
