"""session_compressions: verified summaries standing in for a long session's oldest turns

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_compressions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("first_message_id", sa.Integer(), nullable=False),
        sa.Column("last_message_id", sa.Integer(), nullable=False),
        sa.Column("first_turn", sa.Integer(), nullable=False),
        sa.Column("last_turn", sa.Integer(), nullable=False),
        sa.Column("covers_from", sa.DateTime(), nullable=False),
        sa.Column("covers_to", sa.DateTime(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("verified", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_session_compressions_session", "session_compressions", ["session_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_session_compressions_session", table_name="session_compressions")
    op.drop_table("session_compressions")
