"""reminders and scheduled tasks: jobs, run ledger, quiet hours

Revision ID: 0007
Revises: 0009
Create Date: 2026-11-23 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scheduled_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("words", sa.Text(), nullable=False, server_default=""),
        sa.Column("schedule", sa.String(length=8), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("first_at", sa.DateTime(), nullable=True),
        sa.Column("every_s", sa.Integer(), nullable=True),
        sa.Column("at_time", sa.String(length=5), nullable=True),
        sa.Column("days", sa.Integer(), nullable=False, server_default="127"),
        sa.Column("status", sa.String(length=10), nullable=False, server_default="active"),
        sa.Column("paused_reason", sa.String(length=40), nullable=True),
        sa.Column("next_run_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_scheduled_jobs_due", "scheduled_jobs", ["status", "next_run_at"])
    op.create_index("ix_scheduled_jobs_user", "scheduled_jobs", ["user_id", "status"])
    op.create_table(
        "job_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(), nullable=False),
        sa.Column("deliver_after", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False, server_default="pending"),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("note", sa.String(length=200), nullable=True),
        sa.Column("message_id", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False, server_default="sent"),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["scheduled_jobs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "due_at", name="uq_job_runs_job_due"),
    )
    op.create_index("ix_job_runs_pending", "job_runs", ["status", "deliver_after"])
    op.create_index("ix_job_runs_user", "job_runs", ["user_id", "id"])
    op.create_table(
        "reminder_prefs",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("quiet_start", sa.String(length=5), nullable=True),
        sa.Column("quiet_end", sa.String(length=5), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id"),
    )


def downgrade() -> None:
    op.drop_table("reminder_prefs")
    op.drop_index("ix_job_runs_user", table_name="job_runs")
    op.drop_index("ix_job_runs_pending", table_name="job_runs")
    op.drop_table("job_runs")
    op.drop_index("ix_scheduled_jobs_user", table_name="scheduled_jobs")
    op.drop_index("ix_scheduled_jobs_due", table_name="scheduled_jobs")
    op.drop_table("scheduled_jobs")
