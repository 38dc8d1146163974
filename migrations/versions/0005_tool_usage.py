"""tool usage

Revision ID: 0005
Revises: 0001
Create Date: 2026-11-22 04:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_usage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("request_text", sa.Text(), nullable=False),
        sa.Column("used_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_tool_usage_user_tool", "tool_usage", ["user_id", "tool"])


def downgrade() -> None:
    op.drop_index("ix_tool_usage_user_tool", table_name="tool_usage")
    op.drop_table("tool_usage")
