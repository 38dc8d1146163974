"""check-ins (bot/checkins) and skills (tools/skills)

Revision ID: 0032
Revises: 0027
Create Date: 2026-12-06 08:05:00

Check-ins keep each person's choices (off by default) and one ledger row per person, local
day and slot: the unique row is what makes a restart at brief time send one brief.
Skills keep one row each (their files live in DATA_DIR/skills/<name>/).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models.base import UTCDateTime

revision: str = "0032"
down_revision: str | Sequence[str] | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "checkin_prefs",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("brief_at", sa.String(length=5), nullable=False),
        sa.Column("quiet_start", sa.String(length=5), nullable=False),
        sa.Column("quiet_end", sa.String(length=5), nullable=False),
        sa.Column("max_per_day", sa.Integer(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("useful", sa.Integer(), nullable=False),
        sa.Column("less", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id"),
    )
    op.create_table(
        "checkin_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("slot", sa.String(length=10), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "day", "slot", name="uq_checkin_runs_slot"),
    )
    op.create_index("ix_checkin_runs_user_id", "checkin_runs", ["user_id"])
    op.create_table(
        "skills",
        sa.Column("name", sa.String(length=48), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("installed_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("skills")
    op.drop_index("ix_checkin_runs_user_id", table_name="checkin_runs")
    op.drop_table("checkin_runs")
    op.drop_table("checkin_prefs")
