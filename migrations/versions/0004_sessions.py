"""session archives

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 04:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_archives",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("memory_id", sa.Integer(), nullable=True),
        sa.Column("archived_at", sa.DateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("retry_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id"),
    )
    with op.batch_alter_table("session_archives", schema=None) as batch_op:
        batch_op.create_index(
            "ix_session_archives_pending", ["archived_at", "retry_at"], unique=False
        )
    # Sessions ended before archiving existed count as archived (with no summary), so
    # the first run after the upgrade does not summarise the whole past.
    op.execute(
        "INSERT INTO session_archives (session_id, archived_at, attempts) "
        "SELECT id, ended_at, 0 FROM sessions WHERE ended_at IS NOT NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("session_archives", schema=None) as batch_op:
        batch_op.drop_index("ix_session_archives_pending")
    op.drop_table("session_archives")
