"""indexes for job lookups by (job_id, scheduler) and for open allocations

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 13:35:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.create_index("ix_jobs_job_id_scheduler", ["job_id", "scheduler"])
    with op.batch_alter_table("allocations") as batch_op:
        batch_op.create_index("ix_allocations_end_ts", ["end_ts"])


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch_op:
        batch_op.drop_index("ix_allocations_end_ts")
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_index("ix_jobs_job_id_scheduler")
